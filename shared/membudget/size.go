package membudget

import (
	"fmt"
	"os"
	"runtime/debug"
	"runtime/metrics"
	"strconv"
	"strings"
)

// DefaultBudget is the budget where no container memory limit is found.
const DefaultBudget = 1 << 30

// ContainerShare is the part of a container's memory limit the fetches may use by
// default; the rest is the process's own (serving, coordinator, runtime) and git's
// maintenance children.
const ContainerShare = 0.6

// Default returns the default budget: ContainerShare of the cgroup memory limit (v2,
// else v1) where there is one, else DefaultBudget; and where it came from.
func Default() (int64, string) {
	if lim, ok := cgroupLimit(os.ReadFile); ok {
		return int64(float64(lim) * ContainerShare), fmt.Sprintf("%.0f%% of the cgroup memory limit %s", 100*ContainerShare, FormatSize(lim))
	}
	return DefaultBudget, "default (no cgroup memory limit)"
}

// cgroupLimit reads the memory limit of the process's cgroup: v2 memory.max, else v1
// memory.limit_in_bytes (whose "unlimited" is a huge number).
func cgroupLimit(read func(string) ([]byte, error)) (int64, bool) {
	if b, err := read("/sys/fs/cgroup/memory.max"); err == nil {
		s := strings.TrimSpace(string(b))
		if s == "max" {
			return 0, false
		}
		n, err := strconv.ParseInt(s, 10, 64)
		return n, err == nil && n > 0
	}
	if b, err := read("/sys/fs/cgroup/memory/memory.limit_in_bytes"); err == nil {
		n, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
		return n, err == nil && n > 0 && n < 1<<60
	}
	return 0, false
}

// GoMemLimitShare is GOMEMLIMIT over the budget when the budget sets it: the fetches'
// memory plus a margin for the rest of the process.
const GoMemLimitShare = 1.25

// SetGoMemLimit makes the Go runtime's soft memory limit follow the budget unless
// GOMEMLIMIT is set; it returns the limit in force (math.MaxInt64: none).
func SetGoMemLimit(budget int64) int64 {
	if os.Getenv("GOMEMLIMIT") != "" || budget <= 0 {
		return debug.SetMemoryLimit(-1)
	}
	lim := int64(float64(budget) * GoMemLimitShare)
	debug.SetMemoryLimit(lim)
	return lim
}

// FormatSize writes n bytes in the largest binary unit that keeps it whole-ish.
func FormatSize(n int64) string {
	switch {
	case n >= 1<<30:
		return strconv.FormatFloat(float64(n)/(1<<30), 'f', -1, 64) + "GiB"
	case n >= 1<<20:
		return strconv.FormatFloat(float64(n)/(1<<20), 'f', 1, 64) + "MiB"
	}
	return strconv.FormatInt(n, 10) + "B"
}

// HeapInUse is the Go heap in use: live and not yet swept objects plus the free space
// in spans holding them (read without stopping the world).
func HeapInUse() int64 {
	s := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}, {Name: "/memory/classes/heap/unused:bytes"}}
	metrics.Read(s)
	var n int64
	for _, x := range s {
		if x.Value.Kind() == metrics.KindUint64 {
			n += int64(x.Value.Uint64())
		}
	}
	return n
}
