package main

import (
	"runtime/metrics"
	"sync/atomic"
	"time"
)

// heapMetric is the bytes held by heap objects, live or not yet collected: what a
// process's memory limit (the Lambda's 512 MB) has to hold, read without stopping the world.
const heapMetric = "/memory/classes/heap/objects:bytes"

// heapPeak samples the heap every millisecond from start until stop and returns the
// largest value seen, in bytes.
type heapPeak struct {
	peak atomic.Uint64
	stop chan struct{}
	done chan struct{}
}

func startHeapPeak() *heapPeak {
	h := &heapPeak{stop: make(chan struct{}), done: make(chan struct{})}
	h.sample()
	go func() {
		defer close(h.done)
		tk := time.NewTicker(time.Millisecond)
		defer tk.Stop()
		for {
			select {
			case <-h.stop:
				return
			case <-tk.C:
				h.sample()
			}
		}
	}()
	return h
}

func (h *heapPeak) sample() {
	s := []metrics.Sample{{Name: heapMetric}}
	metrics.Read(s)
	if v := s[0].Value; v.Kind() == metrics.KindUint64 && v.Uint64() > h.peak.Load() {
		h.peak.Store(v.Uint64())
	}
}

// Stop ends the sampling and returns the peak in bytes.
func (h *heapPeak) Stop() uint64 {
	h.sample()
	close(h.stop)
	<-h.done
	return h.peak.Load()
}

func mib(b uint64) float64 { return round(float64(b) / (1 << 20)) }
