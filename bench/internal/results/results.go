// Package results is the on-disk form of the benchmark results: each benchmark program
// writes one JSON file into bench/results/, and the report generator reads them back.
// The types of every part live here so that writer and reader cannot disagree.
package results

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"time"
)

// Meta says where and when a result was measured.
type Meta struct {
	Date      string  `json:"date"` // RFC 3339, UTC
	CPU       string  `json:"cpu"`
	Cores     int     `json:"cores"`
	MemGiB    float64 `json:"mem_gib"`
	OS        string  `json:"os"`
	Arch      string  `json:"arch"`
	GoVersion string  `json:"go_version"`
	GitCommit string  `json:"git_commit,omitempty"`
	Seconds   float64 `json:"seconds"` // how long the benchmark program ran
}

// Collect describes this machine now. Call Finish on the result when the run is done.
func Collect() Meta {
	return Meta{
		Date:      time.Now().UTC().Format(time.RFC3339),
		CPU:       cpuModel(),
		Cores:     runtime.NumCPU(),
		MemGiB:    memGiB(),
		OS:        runtime.GOOS,
		Arch:      runtime.GOARCH,
		GoVersion: runtime.Version(),
		GitCommit: gitCommit(),
	}
}

// Finish records the run's duration.
func (m *Meta) Finish() {
	if t, err := time.Parse(time.RFC3339, m.Date); err == nil {
		m.Seconds = time.Since(t).Round(time.Second).Seconds()
	}
}

// Write stores v as dir/name.json.
func Write(dir, name string, v any) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("results dir: %w", err)
	}
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return fmt.Errorf("encode %s: %w", name, err)
	}
	path := filepath.Join(dir, name+".json")
	if err := os.WriteFile(path, append(b, '\n'), 0o644); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}

// Read loads dir/name.json into v.
func Read(dir, name string, v any) error {
	path := filepath.Join(dir, name+".json")
	b, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("read %s: %w", path, err)
	}
	if err := json.Unmarshal(b, v); err != nil {
		return fmt.Errorf("decode %s: %w", path, err)
	}
	return nil
}

func cpuModel() string {
	f, err := os.Open("/proc/cpuinfo")
	if err != nil {
		return runtime.GOARCH
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if k, v, ok := strings.Cut(sc.Text(), ":"); ok && strings.TrimSpace(k) == "model name" {
			return strings.TrimSpace(v)
		}
	}
	return runtime.GOARCH
}

func memGiB() float64 {
	b, err := os.ReadFile("/proc/meminfo")
	if err != nil {
		return 0
	}
	var kb float64
	for _, line := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(line, "MemTotal:") {
			fmt.Sscanf(strings.TrimPrefix(line, "MemTotal:"), "%g", &kb)
		}
	}
	return float64(int(kb/1024/1024*10+0.5)) / 10
}

// gitCommit is the commit the benchmark runs on, with "+dirty" when files other than
// the benchmark's own outputs (results, report, plots) differ from it: the figures are
// then of code no commit holds.
func gitCommit() string {
	out, err := exec.Command("git", "rev-parse", "--short", "HEAD").Output()
	if err != nil {
		return ""
	}
	commit := strings.TrimSpace(string(out))
	changed, err := exec.Command("git", "status", "--porcelain", "--untracked-files=no", "--", ":/",
		":(exclude,top)bench/results", ":(exclude,top)bench/REPORT.md", ":(exclude,top)bench/plots").Output()
	if err == nil && len(strings.TrimSpace(string(changed))) > 0 {
		commit += "+dirty"
	}
	return commit
}

// Median of xs (the mean of the two middle values for an even count); 0 for none.
func Median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Sorted(slices.Values(xs))
	n := len(s)
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}

// Ratio is a/b, or 0 when b is 0 (JSON has no infinity; the report shows 0 as n/a).
func Ratio(a, b float64) float64 {
	if b == 0 {
		return 0
	}
	return a / b
}

// LoadAverage is the 1-minute load average (0 where /proc/loadavg is missing): above
// Meta.Cores, other work competed for the CPU and inflated wall times.
func LoadAverage() float64 {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return 0
	}
	var v float64
	fmt.Sscan(string(b), &v)
	return v
}
