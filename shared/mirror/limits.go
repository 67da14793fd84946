package mirror

import (
	"fmt"
	"strings"
	"time"

	"github.com/mirrorfleet/mirrorfleet/shared/fetch"
)

// Defaults of Limits. They are far above what real repositories need (a GitHub
// repository with 100,000 pull requests advertises about 200,000 refs in ~15 MB; the
// Linux kernel is ~11 million objects in ~5 GB) and far below what exhausts a worker.
const (
	DefaultMaxRefBytes    = 64 << 20
	DefaultMaxRefs        = 500_000
	DefaultMaxPackBytes   = 8 << 30
	DefaultMaxPackObjects = 20_000_000
	DefaultMaxObjectBytes = 512 << 20
	DefaultMinRate        = 1 << 10 // bytes per second
	DefaultRateWindow     = 2 * time.Minute
)

// minObjectBytes is the smallest a pack entry can be: a one-byte type-and-size header
// and the shortest zlib stream (2-byte header, 2-byte empty deflate block, 4-byte
// Adler-32). A pack declaring more objects than its byte cap could hold at this size
// is lying, and is refused before go-git reads the count (its index writer allocates
// 8 bytes per declared object up front).
const minObjectBytes = 9

// packOverhead is the pack header (12 bytes) and trailer (a 20-byte checksum).
const packOverhead = 32

// Limits bound what one upstream can make a sync receive, so no upstream can exhaust a
// worker's memory, its disk or its fetch slots. Zero fields take the defaults; a
// negative field is no limit (not advised: it only makes sense behind other bounds).
type Limits struct {
	// MaxRefBytes bounds one ref advertisement (the body of GET info/refs).
	MaxRefBytes int64
	// MaxRefs bounds the refs of one ref advertisement.
	MaxRefs int
	// MaxPackBytes bounds the body of one upload-pack response: the pack and its
	// framing. It also bounds what one fetch can add to the disk.
	MaxPackBytes int64
	// PackBytesFor overrides MaxPackBytes per repo: the key is a normalized repo URL,
	// or a prefix of one ending in "/" that covers every repo under it; the longest
	// matching key wins.
	PackBytesFor map[string]int64
	// MaxPackObjects bounds the object count a pack may declare (go-git allocates for
	// the declared count before reading any object).
	MaxPackObjects int64
	// MaxObjectBytes bounds the size one object of a pack may declare, and the size a
	// delta may declare for its result: go-git holds each object whole in memory while
	// it resolves the pack, so this is what bounds a fetch's memory against a
	// compressed "bomb" (a few kilobytes of pack that inflate to gigabytes).
	MaxObjectBytes int64
	// MinRate (bytes per second) and RateWindow: a transfer that receives less than
	// MinRate × RateWindow in any RateWindow is cut, so a trickling upstream frees its
	// fetch slot after one window instead of holding it until Config.Timeout.
	MinRate    int64
	RateWindow time.Duration
}

// DefaultLimits returns the defaults.
func DefaultLimits() Limits {
	return Limits{MaxRefBytes: DefaultMaxRefBytes, MaxRefs: DefaultMaxRefs, MaxPackBytes: DefaultMaxPackBytes,
		MaxPackObjects: DefaultMaxPackObjects, MaxObjectBytes: DefaultMaxObjectBytes, MinRate: DefaultMinRate, RateWindow: DefaultRateWindow}
}

func (l Limits) withDefaults() Limits {
	d := DefaultLimits()
	if l.MaxRefBytes == 0 {
		l.MaxRefBytes = d.MaxRefBytes
	}
	if l.MaxRefs == 0 {
		l.MaxRefs = d.MaxRefs
	}
	if l.MaxPackBytes == 0 {
		l.MaxPackBytes = d.MaxPackBytes
	}
	if l.MaxPackObjects == 0 {
		l.MaxPackObjects = d.MaxPackObjects
	}
	if l.MaxObjectBytes == 0 {
		l.MaxObjectBytes = d.MaxObjectBytes
	}
	if l.MinRate == 0 {
		l.MinRate = d.MinRate
	}
	if l.RateWindow <= 0 {
		l.RateWindow = d.RateWindow
	}
	return l
}

// Validate checks the per-repo overrides' keys.
func (l Limits) Validate() error {
	for k, v := range l.PackBytesFor {
		if !strings.HasPrefix(k, "https://") && !strings.HasPrefix(k, "http://") {
			return fmt.Errorf("pack byte override %q: the key must be a repo URL or URL prefix (https://host/owner/ or https://host/owner/repo)", k)
		}
		if v <= 0 {
			return fmt.Errorf("pack byte override for %s: %d is not a positive size", k, v)
		}
	}
	return nil
}

// syncLimits are the limits of one sync, resolved for its repo and its disk headroom.
type syncLimits struct {
	maxRefBytes, maxPackBytes, maxObjects, maxObjectBytes int64
	maxRefs                                               int
	minRate                                               int64
	window                                                time.Duration
	headroom                                              bool // maxPackBytes comes from the disk headroom
}

// forTarget resolves the limits of one sync of t.
func (l Limits) forTarget(t fetch.Target) syncLimits {
	s := syncLimits{maxRefBytes: l.MaxRefBytes, maxRefs: l.MaxRefs, maxPackBytes: l.MaxPackBytes,
		maxObjects: l.MaxPackObjects, maxObjectBytes: l.MaxObjectBytes, minRate: l.MinRate, window: l.RateWindow}
	best := -1
	for k, v := range l.PackBytesFor {
		if len(k) > best && (k == t.URL || strings.HasSuffix(k, "/") && strings.HasPrefix(t.URL, k)) {
			best, s.maxPackBytes = len(k), v
		}
	}
	if t.MaxBytes > 0 && (s.maxPackBytes < 0 || t.MaxBytes < s.maxPackBytes) {
		s.maxPackBytes, s.headroom = t.MaxBytes, true
	}
	return s
}

// objectsAllowed is the largest object count a pack may declare under these limits.
func (s syncLimits) objectsAllowed() int64 {
	n := s.maxObjects
	if s.maxPackBytes >= 0 {
		byBytes := max(s.maxPackBytes-packOverhead, 0) / minObjectBytes
		if n < 0 || byBytes < n {
			n = byBytes
		}
	}
	return n
}
