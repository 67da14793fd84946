package membudget

// Estimates of what one fetch needs, from what is known before it starts and once its
// pack header has arrived. The constants are measured (bench/fetchcost, ADR 0026):
// go-git's memory during a fetch grows with the object count of the pack it indexes.
const (
	// FetchBase covers a fetch that brings no pack: the ref advertisement, the
	// negotiation, the object cache of the open mirror and buffers.
	FetchBase = 16 << 20
	// PerObject is the memory per object of a first mirror's pack, indexed from disk
	// (shared/mirror packindex.go: ~55 MiB resident for 163k objects).
	PerObject = 256
	// PerObjectUpdate is the memory per object of an update's pack, which go-git's
	// own PackWriter indexes (~1.2 KiB an object measured, its delta cache included).
	PerObjectUpdate = 5 << 8
	// IndexShare: an existing mirror's pack indexes, which go-git reads into memory to
	// negotiate and resolve deltas against, are about this part of its size.
	IndexShare = 32
)

// Start is what a fetch reserves before it starts: the base, an existing mirror's
// indexes (sizeBytes, 0 for a first mirror), and at least what the repo's previous
// fetch of the same kind came to need (prev, 0 if none).
func Start(sizeBytes, prev int64) int64 {
	return max(FetchBase+max(sizeBytes, 0)/IndexShare, prev)
}

// ForPack is what a fetch needs once its pack header declared objects of perObject
// bytes each, from its start estimate.
func ForPack(start, objects, perObject int64) int64 {
	return start + max(objects, 0)*perObject
}
