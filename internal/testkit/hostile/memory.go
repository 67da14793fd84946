package hostile

import (
	"runtime"
	"runtime/metrics"
	"sync"
	"time"
)

// Sampler records the peak of this process's Go heap while an attack runs: the bytes
// of heap objects (live and not yet swept), sampled every few milliseconds from
// runtime/metrics, which does not stop the world. A single huge allocation shows at
// once; a slow leak shows as it grows.
type Sampler struct {
	stop chan struct{}
	done chan struct{}
	mu   sync.Mutex
	peak uint64
}

const heapObjects = "/memory/classes/heap/objects:bytes"

// StartSampler collects garbage first (so earlier work does not count) and samples
// until Stop.
func StartSampler() *Sampler {
	runtime.GC()
	s := &Sampler{stop: make(chan struct{}), done: make(chan struct{})}
	sample := []metrics.Sample{{Name: heapObjects}}
	read := func() {
		metrics.Read(sample)
		v := sample[0].Value.Uint64()
		s.mu.Lock()
		s.peak = max(s.peak, v)
		s.mu.Unlock()
	}
	read()
	go func() {
		defer close(s.done)
		t := time.NewTicker(2 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-s.stop:
				read()
				return
			case <-t.C:
				read()
			}
		}
	}()
	return s
}

// Peak is the highest heap seen so far, in bytes.
func (s *Sampler) Peak() uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.peak
}

// Stop ends sampling and returns the peak.
func (s *Sampler) Stop() uint64 {
	close(s.stop)
	<-s.done
	return s.Peak()
}
