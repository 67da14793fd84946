package ring

// HashID names the key hash; it is stored in store.Ring.Hash so a reader can tell how
// keys map onto the stored token positions.
const HashID = "fnv1a64-splitmix64"

const (
	fnvOffset = 14695981039346656037
	fnvPrime  = 1099511628211
)

// KeyHash maps a ring key (store.RingKey) to its position on the ring.
func KeyHash(key string) uint64 {
	h := uint64(fnvOffset)
	for i := 0; i < len(key); i++ {
		h ^= uint64(key[i])
		h *= fnvPrime
	}
	// FNV-1a leaves the last bytes of a key mostly in the low bits, and keys differ mostly
	// at the end ("repo-1", "repo-2"). The splitmix64 finalizer is a bijection with full
	// avalanche, so positions are uniform over the whole circle without adding collisions.
	h ^= h >> 30
	h *= 0xbf58476d1ce4e5b9
	h ^= h >> 27
	h *= 0x94d049bb133111eb
	h ^= h >> 31
	return h
}
