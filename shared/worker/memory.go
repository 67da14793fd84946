package worker

import (
	"context"
	"sync/atomic"

	"github.com/mirrorfleet/mirrorfleet/shared/fetch"
	"github.com/mirrorfleet/mirrorfleet/shared/membudget"
)

// admitMemory reserves what the fetch of j is expected to need (membudget.Start) and
// waits, within ctx, until the worker's memory pool grants it; the returned context
// grows the reservation when the pack header declares more objects than that
// (membudget.ForPack). The caller releases the reservation when the fetch ends, and
// passes the context to the fetch. No pool: nothing to wait for.
func (w *Worker) admitMemory(ctx context.Context, j Job, cloned bool) (context.Context, *membudget.Reservation, *atomic.Int64, error) {
	pool := w.cfg.Memory
	if pool == nil {
		return ctx, nil, nil, nil
	}
	w.mu.Lock()
	var size, prev int64
	if r, ok := w.repos[j.Target.ID]; ok {
		size = r.rec.SizeBytes
		if cloned {
			prev = r.memUpdate
		} else {
			prev = r.memClone
		}
	}
	w.mu.Unlock()
	if !cloned {
		size = 0
	}
	start := membudget.Start(size, prev)
	res, err := pool.Reserve(ctx, start)
	if err != nil {
		return ctx, nil, nil, err
	}
	need := new(atomic.Int64)
	need.Store(start)
	base := membudget.Start(size, 0)
	ctx = fetch.WithPackObjects(ctx, func(ctx context.Context, objects int64) error {
		n := membudget.ForPack(base, objects)
		need.Store(n)
		if n <= res.Held() {
			return nil
		}
		return res.Grow(ctx, n)
	})
	return ctx, res, need, nil
}

// doneMemory releases a fetch's reservation and remembers what it came to need, for
// the repo's next fetch of the same kind.
func (w *Worker) doneMemory(j Job, cloned bool, res *membudget.Reservation, need *atomic.Int64) {
	if res == nil {
		return
	}
	res.Release()
	w.mu.Lock()
	defer w.mu.Unlock()
	if r, ok := w.repos[j.Target.ID]; ok {
		if cloned {
			r.memUpdate = need.Load()
		} else {
			r.memClone = need.Load()
		}
	}
}
