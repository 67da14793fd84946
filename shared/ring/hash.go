package ring

import "github.com/mirrorfleet/mirrorfleet/shared/store"

// HashID names the key hash; it is stored in store.Ring.Hash so a reader can tell how
// keys map onto the stored token positions.
const HashID = store.RingHashID

// KeyHash maps a ring key (store.RingKey) to its position on the ring (store.RingHash,
// which the stores index repos by).
func KeyHash(key string) uint64 { return store.RingHash(key) }

// Mix is the splitmix64 finalizer (store.Mix): a cheap bijection of 64-bit values with
// full avalanche.
func Mix(x uint64) uint64 { return store.Mix(x) }
