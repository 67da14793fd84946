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
	return Mix(h)
}

// Mix is the splitmix64 finalizer: a cheap bijection of 64-bit values with full
// avalanche.
func Mix(x uint64) uint64 {
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	x ^= x >> 31
	return x
}
