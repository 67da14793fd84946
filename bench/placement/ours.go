package main

import (
	"fmt"
	"slices"

	"github.com/mirrorfleet/mirrorfleet/shared/ring"
	"github.com/mirrorfleet/mirrorfleet/shared/store"
)

// ours is shared/ring, the production ring, with worker numbers alongside.
type ours struct {
	r   *ring.Ring
	ids []string // worker number → ID; "" for a worker that left
}

func newOurs(ids []string) (placer, error) {
	ms := make([]store.Member, len(ids))
	for i, id := range ids {
		ms[i] = store.Member{ID: id}
	}
	r, err := ring.New().AddAll(ms...)
	if err != nil {
		return nil, fmt.Errorf("build ring: %w", err)
	}
	return &ours{r: r, ids: ids}, nil
}

func (o *ours) place(hs []uint64, out []int32) {
	num := make(map[string]int32, len(o.ids))
	for w, id := range o.ids {
		if id != "" {
			num[id] = int32(w)
		}
	}
	placeParallel(hs, out, func(h uint64) int32 {
		id, _ := o.r.Owner(h)
		return num[id]
	})
}

func (o *ours) lookup(h uint64) int {
	id, _ := o.r.Owner(h)
	return len(id)
}

func (o *ours) join(w int32, id string) (placer, error) {
	if int(w) != len(o.ids) {
		return nil, fmt.Errorf("join: worker number %d, want %d", w, len(o.ids))
	}
	r, err := o.r.Add(store.Member{ID: id})
	if err != nil {
		return nil, fmt.Errorf("join: %w", err)
	}
	return &ours{r: r, ids: append(slices.Clip(o.ids), id)}, nil
}

func (o *ours) leave(w int32) (placer, error) {
	if int(w) >= len(o.ids) || o.ids[w] == "" {
		return nil, fmt.Errorf("leave: no worker %d", w)
	}
	r, err := o.r.Remove(o.ids[w])
	if err != nil {
		return nil, fmt.Errorf("leave: %w", err)
	}
	ids := slices.Clone(o.ids)
	ids[w] = ""
	return &ours{r: r, ids: ids}, nil
}

func (o *ours) sharePeakMean() float64 {
	peak := 0.0
	for _, s := range o.r.Shares() {
		peak = max(peak, s)
	}
	return peak * float64(o.r.Len())
}

func (o *ours) numTokens() int { return o.r.NumTokens() }
