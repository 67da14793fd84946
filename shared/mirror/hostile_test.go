package mirror

import (
	"context"
	"io"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/mirrorfleet/mirrorfleet/internal/testkit/hostile"
	"github.com/mirrorfleet/mirrorfleet/shared/fetch"
	"github.com/mirrorfleet/mirrorfleet/shared/urlpolicy"
)

// heapBound is what a sync against a hostile upstream may grow this test process's
// heap to. Without the guards the attacks below reach gigabytes or run the process out
// of memory (the lying pack header alone asks for a 16 GiB allocation); with them a
// sync stays within a few megabytes of its limits.
const heapBound = 256 << 20

// testLimits are small limits, so the attacks are cut quickly. The rate window is long:
// git http-backend on a busy machine under the race detector may take seconds to
// answer; only the trickle test shortens it (trickleLimits).
func testLimits() Limits {
	return Limits{MaxRefBytes: 1 << 20, MaxRefs: 10_000, MaxPackBytes: 16 << 20, MaxObjectBytes: 8 << 20,
		MaxPackObjects: 1_000_000, MinRate: 1 << 10, RateWindow: time.Minute}
}

// trickleLimits cut a transfer under 1 KiB/s within a second; the trickling upstream
// sends 20 bytes a second.
func trickleLimits() Limits {
	l := testLimits()
	l.RateWindow = time.Second
	return l
}

// TestHostileUpstreams syncs every attack of package hostile against a real server on
// 127.0.0.1, through the URL policy's HTTP client, and checks each is refused with a
// classified error, leaves nothing on disk, and keeps the heap bounded; then that a
// normal repository still syncs through the same Mirrorer.
func TestHostileUpstreams(t *testing.T) {
	up, err := hostile.Start()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(up.Close)
	root := t.TempDir()
	policy := urlpolicy.Policy{AllowPrivateHosts: true}
	m := newTestMirrorer(t, Config{Root: root, Client: policy.HTTPClient(0), Limits: testLimits(), Timeout: time.Minute})
	slow := newTestMirrorer(t, Config{Root: root, Client: policy.HTTPClient(0), Limits: trickleLimits(), Timeout: time.Minute})

	want := map[hostile.Attack]struct {
		kind    fetch.Kind
		mention string
	}{
		hostile.EndlessRefs:   {fetch.KindLimit, "ref advertisement"},
		hostile.EndlessPack:   {fetch.KindLimit, "pack larger than"},
		hostile.Trickle:       {fetch.KindTimeout, "MinRate"},
		hostile.LyingCount:    {fetch.KindLimit, "2147483647 objects"},
		hostile.LyingCountRaw: {fetch.KindLimit, "2147483647 objects"},
		hostile.LyingSize:     {fetch.KindLimit, "1099511627776 bytes"},
		hostile.Bomb:          {fetch.KindLimit, "4294967296 bytes"},
		hostile.DeltaBomb:     {fetch.KindLimit, "delta whose result declares 68719476736 bytes"},
		hostile.RedirectLoop:  {fetch.KindPolicy, "redirects"},
		hostile.RateLimited:   {fetch.KindRateLimited, "429"},
	}
	for _, a := range hostile.Attacks {
		t.Run(string(a), func(t *testing.T) {
			w, ok := want[a]
			if !ok {
				t.Fatalf("no expectation for attack %s", a)
			}
			tg := fetch.Target{ID: string(a), URL: up.RepoURL(a)}
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			mem := hostile.StartSampler()
			start := time.Now()
			mm := m
			if a == hostile.Trickle {
				mm = slow
			}
			_, err := mm.Sync(ctx, tg)
			peak := mem.Stop()
			kindIs(t, err, w.kind)
			if !strings.Contains(err.Error(), w.mention) {
				t.Fatalf("error does not say %q: %v", w.mention, err)
			}
			if a == hostile.RateLimited {
				if ra := fetch.RetryAfterOf(err); ra != up.RetryAfter {
					t.Fatalf("Retry-After %v, want %v", ra, up.RetryAfter)
				}
			}
			if peak > heapBound {
				t.Fatalf("heap peaked at %d MiB, over the bound of %d MiB", peak>>20, heapBound>>20)
			}
			if m.Exists(tg) {
				t.Fatal("a refused clone left a mirror")
			}
			t.Logf("%s: refused after %v, heap peak %d MiB: %v", a, time.Since(start).Round(time.Millisecond), peak>>20, err)
		})
	}
	if entries, _ := os.ReadDir(m.tmpDir); len(entries) != 0 {
		t.Fatalf("refused clones left temp files: %v", entries)
	}

	s := newGitServer(t)
	u := buildBasic(t, s, "x/good")
	good := newTestMirrorer(t, Config{Root: root, Client: urlpolicy.Policy{AllowPrivateHosts: true}.HTTPClient(0), Limits: testLimits()})
	tg := u.target("good")
	if res := mustSync(t, good, tg); !res.Cloned {
		t.Fatal("good repo not cloned")
	}
	assertMirrored(t, good, u, tg)
	fsck(t, s.home, mirrorDir(t, good, tg))
}

// TestHostileFetchKeepsMirror: a repo that turns hostile after it was mirrored keeps
// its good mirror, and the failed fetch leaves no temp pack behind.
func TestHostileFetchKeepsMirror(t *testing.T) {
	s := newGitServer(t)
	u := buildBasic(t, s, "x/turns")
	up, err := hostile.Start()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(up.Close)
	m := newTestMirrorer(t, Config{Limits: testLimits()})
	tg := u.target("turns")
	mustSync(t, m, tg)
	dir := mirrorDir(t, m, tg)
	before := forEachRef(t, s.home, dir, dir)
	u.commit(t, "more", map[string][]byte{"d.txt": []byte("d\n")})

	// The upstream now answers its upload-pack requests with a lying pack.
	s.Intercept(func(w http.ResponseWriter, r *http.Request, next http.Handler) {
		if r.Method == http.MethodPost {
			r2 := r.Clone(r.Context())
			r2.URL.Path = "/" + string(hostile.LyingCount) + "/git-upload-pack"
			proxy(t, up.URL, w, r2)
			return
		}
		next.ServeHTTP(w, r)
	})
	_, err = m.Sync(context.Background(), tg)
	kindIs(t, err, fetch.KindLimit)
	if got := forEachRef(t, s.home, dir, dir); got != before {
		t.Fatalf("refused fetch changed the mirror's refs:\n%s", got)
	}
	if tmps := m.packTemps(dir); len(tmps) != 0 {
		t.Fatalf("temp pack files left: %v", tmps)
	}
	fsck(t, s.home, dir)

	s.Intercept(nil)
	if res := mustSync(t, m, tg); !res.Changed {
		t.Fatal("no change after the upstream recovered")
	}
	assertMirrored(t, m, u, tg)
}

// proxy forwards r to base and streams the answer back.
func proxy(t testing.TB, base string, w http.ResponseWriter, r *http.Request) {
	req, err := http.NewRequestWithContext(r.Context(), r.Method, base+r.URL.Path, r.Body)
	if err != nil {
		t.Error(err)
		return
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return
	}
	defer resp.Body.Close()
	for k, v := range resp.Header {
		w.Header()[k] = v
	}
	w.WriteHeader(resp.StatusCode)
	_, _ = io.Copy(w, resp.Body)
}
