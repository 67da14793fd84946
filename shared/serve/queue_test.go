package serve

import (
	"context"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mirrorfleet/mirrorfleet/shared/gitcmd"
	"github.com/mirrorfleet/mirrorfleet/shared/httpguard"
)

// TestPerClientLimit: a client past its bound waits in its own queue for up to the
// queue wait, then gets 429; behind a trusted proxy the client is the address
// X-Forwarded-For names, and another client is not held up.
func TestPerClientLimit(t *testing.T) {
	e := newEnv(t, func(c *Config) {
		c.MaxPerClient = 2
		c.QueueWait = 300 * time.Millisecond
		c.TrustedProxies = []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}
	})
	e.repo("example.com/one.git")
	d, err := e.h.resolve("example.com/one.git")
	if err != nil {
		t.Fatal(err)
	}
	for range 2 {
		rel, why := e.h.limit.Acquire(context.Background(), "192.0.2.7", d, 0)
		if why != httpguard.Admitted {
			t.Fatalf("place refused: %v", why)
		}
		defer rel()
	}
	adv := "/git/example.com/one.git/info/refs?service=git-upload-pack"
	start := time.Now()
	status, hdr, body := e.do("GET", adv, map[string]string{"X-Forwarded-For": "192.0.2.7"}, nil)
	if status != 429 || hdr.Get("Retry-After") == "" || !strings.Contains(body, "your address") {
		t.Fatalf("a client past its bound: %d %q %q", status, hdr.Get("Retry-After"), body)
	}
	if waited := time.Since(start); waited < 300*time.Millisecond {
		t.Fatalf("refused after %s, before its queue wait ran out", waited)
	}
	// Another client, and one that claims the busy address behind an address the
	// proxy saw: counted as what the proxy saw.
	for _, xff := range []string{"192.0.2.8", "192.0.2.7, 198.51.100.1"} {
		if status, _, body := e.do("GET", adv, map[string]string{"X-Forwarded-For": xff}, nil); status != 200 {
			t.Fatalf("X-Forwarded-For %q: %d %q", xff, status, body)
		}
	}
}

// slowGit is a git whose upload-pack takes delay to start and which writes, at each
// start, how many of its upload-packs run (countsFile): requests then overlap as a CI
// runner's clones do, and the test sees how many ran at once.
func slowGit(t *testing.T, delay time.Duration) (path, countsFile string) {
	t.Helper()
	git, err := gitcmd.Find(context.Background())
	if err != nil {
		t.Skip(err)
	}
	dir := t.TempDir()
	running := filepath.Join(dir, "running")
	if err := os.Mkdir(running, 0o755); err != nil {
		t.Fatal(err)
	}
	countsFile = filepath.Join(dir, "counts")
	script := fmt.Sprintf(`#!/bin/sh
case " $* " in
*" upload-pack "*)
  touch %[1]s/$$
  ls %[1]s | wc -l >> %[2]s
  sleep %[3]s
  %[4]s "$@"
  rc=$?
  rm -f %[1]s/$$
  exit $rc;;
esac
exec %[4]s "$@"
`, running, countsFile, strconv.FormatFloat(delay.Seconds(), 'f', 3, 64), git.Path)
	path = filepath.Join(dir, "git")
	if err := os.WriteFile(path, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return path, countsFile
}

// highest is the highest count slowGit wrote.
func highest(t *testing.T, file string) int {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	top := 0
	for _, l := range strings.Fields(string(b)) {
		n, _ := strconv.Atoi(l)
		top = max(top, n)
	}
	return top
}

// TestOneClientsBurstQueues: a burst of clones from one address (a CI runner, a NAT)
// is served MaxPerClient at a time from a bounded queue, as Gitaly's concurrency
// limiter serves it, with the defaults: 12 concurrent git clones all succeed; of 64
// concurrent requests 8 run at a time, 16 wait their turn and are served, and the rest
// are refused at once with 429 and Retry-After.
func TestOneClientsBurstQueues(t *testing.T) {
	git, counts := slowGit(t, 300*time.Millisecond)
	e := newEnv(t, func(c *Config) { c.Git = git })
	e.repo("example.com/busy.git")

	var wg sync.WaitGroup
	errs := make(chan string, 12)
	for i := range 12 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			dst := filepath.Join(t.TempDir(), fmt.Sprint("c", i))
			if out, err := e.gitErr("", "clone", "--quiet", e.url("example.com/busy.git"), dst); err != nil {
				errs <- fmt.Sprintf("clone %d: %v %s", i, err, out)
			}
		}()
	}
	wg.Wait()
	close(errs)
	for msg := range errs {
		t.Error(msg)
	}
	if top := highest(t, counts); top > 8 {
		t.Errorf("%d git processes of one client at once, want at most 8", top)
	}
	if t.Failed() {
		return
	}

	os.Remove(counts)
	type answer struct {
		status int
		retry  string
	}
	answers := make(chan answer, 64)
	start := make(chan struct{})
	for range 64 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			status, hdr, _ := e.do("GET", "/git/example.com/busy.git/info/refs?service=git-upload-pack", nil, nil)
			answers <- answer{status, hdr.Get("Retry-After")}
		}()
	}
	close(start)
	wg.Wait()
	close(answers)
	byStatus := map[int]int{}
	for a := range answers {
		byStatus[a.status]++
		if a.status == 429 && a.retry == "" {
			t.Error("a 429 without Retry-After")
		}
	}
	if byStatus[200] != 8+16 || byStatus[429] != 64-8-16 {
		t.Fatalf("64 requests from one address: %v, want 24 × 200 and 40 × 429", byStatus)
	}
	if top := highest(t, counts); top != 8 {
		t.Errorf("%d git processes of one client at once, want 8", top)
	}
}
