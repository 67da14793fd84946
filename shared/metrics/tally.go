package metrics

import (
	"slices"
	"strings"
	"sync"
)

// Tally is a sink that keeps, in memory, the sum and the number of the samples
// recorded under each key: the name, then the dimension values in the order of their
// names ("EventsDropped/webhook"). Tests and tools read what a component reported
// through it; it is safe for concurrent use, and its zero value is ready.
type Tally struct {
	mu     sync.Mutex
	totals map[string]float64
	counts map[string]int
}

// Record adds the samples.
func (t *Tally) Record(samples ...Sample) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.totals == nil {
		t.totals, t.counts = map[string]float64{}, map[string]int{}
	}
	for _, s := range samples {
		k := TallyKey(s)
		t.totals[k] += s.Value
		t.counts[k]++
	}
	return nil
}

// Total is the sum of the values recorded under key.
func (t *Tally) Total(key string) float64 {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.totals[key]
}

// Count is how many samples were recorded under key.
func (t *Tally) Count(key string) int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.counts[key]
}

// TallyKey is the key a sample is kept under in a Tally.
func TallyKey(s Sample) string {
	names := make([]string, 0, len(s.Dims))
	for n := range s.Dims {
		names = append(names, n)
	}
	slices.Sort(names)
	var b strings.Builder
	b.WriteString(s.Name)
	for _, n := range names {
		b.WriteString("/")
		b.WriteString(s.Dims[n])
	}
	return b.String()
}
