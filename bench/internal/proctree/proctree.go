// Package proctree measures the memory of a process tree: the summed resident sets of
// a process's descendants, sampled while it runs (Linux /proc).
package proctree

import (
	"os"
	"strconv"
	"strings"
	"time"
)

// SampleEvery is the sampling period.
const SampleEvery = 10 * time.Millisecond

// SampleTree returns the peak summed RSS of the descendants of pid (the launcher,
// which does not count), sampled until stop is closed.
func SampleTree(pid int, stop <-chan struct{}) int64 {
	t := time.NewTicker(SampleEvery)
	defer t.Stop()
	var peak int64
	for {
		peak = max(peak, descendantsRSS(pid))
		select {
		case <-stop:
			return peak
		case <-t.C:
		}
	}
}

var pageSize = int64(os.Getpagesize())

// descendantsRSS sums the resident sets of all descendants of pid now. Processes
// that exit meanwhile count as 0.
func descendantsRSS(pid int) int64 {
	var sum int64
	queue := Children(pid)
	for len(queue) > 0 {
		p := queue[0]
		queue = queue[1:]
		sum += rssOf(p)
		queue = append(queue, Children(p)...)
	}
	return sum
}

func rssOf(pid int) int64 {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/statm")
	if err != nil {
		return 0
	}
	f := strings.Fields(string(b))
	if len(f) < 2 {
		return 0
	}
	pages, _ := strconv.ParseInt(f[1], 10, 64)
	return pages * pageSize
}

// Children lists the children of every thread of pid (/proc/PID/task/TID/children).
func Children(pid int) []int {
	tasks, _ := os.ReadDir("/proc/" + strconv.Itoa(pid) + "/task")
	var out []int
	for _, t := range tasks {
		b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/task/" + t.Name() + "/children")
		if err != nil {
			continue
		}
		for _, f := range strings.Fields(string(b)) {
			if c, err := strconv.Atoi(f); err == nil {
				out = append(out, c)
			}
		}
	}
	return out
}
