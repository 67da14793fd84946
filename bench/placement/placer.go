package main

import (
	"runtime"
	"sync"

	"github.com/mirrorfleet/mirrorfleet/shared/ring"
)

// placer is one placement scheme at one membership. Workers are known by number (the
// index of their ID when the placement was built); a join adds a number and a leave
// retires one, so the owners of a key before and after a change can be compared.
type placer interface {
	// place sets out[i] to the worker number owning hs[i]. Keys are placed in order,
	// which matters only for schemes whose placement depends on the other keys.
	place(hs []uint64, out []int32)
	// lookup is one lookup as a client of the scheme would do it. The result only feeds
	// a benchmark sink.
	lookup(h uint64) int
	// join returns the placement with worker number w (ID id) added.
	join(w int32, id string) (placer, error)
	// leave returns the placement without worker w; the others keep their numbers.
	leave(w int32) (placer, error)
}

// sharer is a placer that divides the hash space into arcs whose sizes can be measured.
type sharer interface {
	// sharePeakMean is the largest share of the hash space times the number of workers.
	sharePeakMean() float64
}

// tokener is a placer with virtual nodes.
type tokener interface {
	numTokens() int
}

// placeParallel sets out[i] = owner(hs[i]) on every core; owner must be safe for
// concurrent use. Rendezvous at 1000 workers is 1e9 scores per pass, so this halves the
// run time on two cores.
func placeParallel(hs []uint64, out []int32, owner func(uint64) int32) {
	procs := runtime.GOMAXPROCS(0)
	chunk := (len(hs) + procs - 1) / procs
	var wg sync.WaitGroup
	for lo := 0; lo < len(hs); lo += chunk {
		hi := min(lo+chunk, len(hs))
		wg.Go(func() {
			for i := lo; i < hi; i++ {
				out[i] = owner(hs[i])
			}
		})
	}
	wg.Wait()
}

// mix is the ring's splitmix64 finalizer, used for worker scores, jump hash's random
// stream and the uniform reference placement.
func mix(x uint64) uint64 { return ring.Mix(x) }

// golden is 2^64/φ, the splitmix64 stream increment.
const golden = 0x9e3779b97f4a7c15

// workerSeed is a worker's 64-bit identity for schemes that hash workers, not tokens.
func workerSeed(id string) uint64 { return ring.KeyHash(id) }
