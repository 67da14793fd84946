package feeds

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mirrorfleet/mirrorfleet/shared/clock"
	"github.com/mirrorfleet/mirrorfleet/shared/metrics"
)

// credentialTrap is a server a redirect may lead to: it records every credential header
// it is sent.
type credentialTrap struct {
	mu   sync.Mutex
	seen []string
	hits int
	srv  *httptest.Server
}

func newCredentialTrap(t *testing.T, tls bool) *credentialTrap {
	c := &credentialTrap{}
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c.mu.Lock()
		defer c.mu.Unlock()
		c.hits++
		for _, k := range []string{"Authorization", "Private-Token", "Cookie"} {
			if v := r.Header.Get(k); v != "" {
				c.seen = append(c.seen, k+": "+v)
			}
		}
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `[]`)
	})
	if tls {
		c.srv = httptest.NewTLSServer(h)
	} else {
		c.srv = httptest.NewServer(h)
	}
	t.Cleanup(c.srv.Close)
	return c
}

func (c *credentialTrap) reset() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.seen, c.hits = nil, 0
}

func (c *credentialTrap) credentials() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]string(nil), c.seen...)
}

// TestRedirectsKeepTheCredentialHome: a forge's answer that redirects to another host
// (over https, with a valid certificate) or to plain http is refused before anything is
// sent there, for every forge; the probe fails saying so. A redirect within the feed's
// own origin is followed with the credential.
func TestRedirectsKeepTheCredentialHome(t *testing.T) {
	otherHost := newCredentialTrap(t, true) // https://example.com:<port>, a name the test certificate holds
	plain := newCredentialTrap(t, false)    // http://127.0.0.1:<port>
	_, otherPort, _ := net.SplitHostPort(otherHost.srv.Listener.Addr().String())

	type forge struct {
		name, token string
		ff          *fakeForge
		repos       func() []string
	}
	gl := newFakeGitLab(t, "glpat-secret")
	gt := newFakeGitea(t, "gitea-secret")
	gh := newFakeGitHub(t, "ghp-secret", 5000, t0.Add(time.Hour))
	gl.add("g/a", t0.Add(-time.Minute))
	gt.add("o/a", t0.Add(-time.Minute))
	gh.add("o/a", t0.Add(-time.Minute))
	for _, f := range []forge{
		{"gitlab", "glpat-secret", gl, nil},
		{"gitea", "gitea-secret", gt, nil},
		{"github", "ghp-secret", gh.fakeForge, func() []string { return []string{gh.srv.URL + "/o/a"} }},
	} {
		t.Run(f.name, func(t *testing.T) {
			otherHost.reset()
			plain.reset()
			// The client reaches example.com at the trap, as DNS would send it there.
			tr := f.ff.srv.Client().Transport.(*http.Transport).Clone()
			dial := &net.Dialer{}
			tr.DialContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
				if host, port, _ := net.SplitHostPort(addr); host == "example.com" && port == otherPort {
					addr = otherHost.srv.Listener.Addr().String()
				}
				return dial.DialContext(ctx, network, addr)
			}
			client := &http.Client{Transport: tr, Timeout: 10 * time.Second}
			src := source(t, f.name+"="+f.ff.srv.URL, map[string]string{"127.0.0.1": f.token})
			var repos []string
			if f.repos != nil {
				repos = f.repos()
			}
			for _, target := range []string{
				"https://example.com:" + otherPort + "/api/v4/projects",
				plain.srv.URL + "/api/v4/projects",
			} {
				for _, status := range []int{http.StatusMovedPermanently, http.StatusTemporaryRedirect} {
					p := New(src, client, clock.NewVirtual(t0), 5*time.Minute)
					f.ff.script(status, map[string]string{"Location": target}, "")
					_, err := p.Probe(context.Background(), repos)
					var bad *BadAnswer
					if !errors.As(err, &bad) || !strings.Contains(err.Error(), "redirect") {
						t.Errorf("%d to %s: %v, want a refused redirect", status, target, err)
					}
					if err != nil && strings.Contains(err.Error(), f.token) {
						t.Errorf("the error names the token: %v", err)
					}
				}
			}
			if got := append(otherHost.credentials(), plain.credentials()...); len(got) > 0 {
				t.Fatalf("credentials sent away from the feed's origin: %q", got)
			}
			otherHost.mu.Lock()
			plain.mu.Lock()
			hits := otherHost.hits + plain.hits
			otherHost.mu.Unlock()
			plain.mu.Unlock()
			if hits != 0 {
				t.Errorf("%d requests reached the other origins; a refused redirect sends nothing", hits)
			}
			// Within the origin the redirect is followed and the credential kept (the
			// fakes refuse a request without it).
			p := New(src, client, clock.NewVirtual(t0), 5*time.Minute)
			path := map[string]string{"gitlab": "/api/v4/projects?last_activity_after=" + t0.Add(-time.Hour).Format(time.RFC3339) + "&order_by=last_activity_at&sort=desc&per_page=100&page=1",
				"gitea": "/api/v1/repos/search?sort=updated&order=desc&limit=50&page=1", "github": "/api/graphql"}[f.name]
			f.ff.script(http.StatusTemporaryRedirect, map[string]string{"Location": f.ff.srv.URL + path}, "")
			cs, err := p.Probe(context.Background(), repos)
			if err != nil || len(cs) != 1 {
				t.Fatalf("same-origin redirect: %v %v", cs, err)
			}
		})
	}
}

// TestOversizedPagesAreRefused: a listing page with more items than asked for (a forge
// that ignores per_page or limit) is a bad answer, and nothing of it is taken.
func TestOversizedPagesAreRefused(t *testing.T) {
	page := func(n int, item func(int) map[string]any) []byte {
		items := make([]map[string]any, n)
		for i := range items {
			items[i] = item(i)
		}
		b, _ := json.Marshal(items)
		return b
	}
	gl := newFakeGitLab(t, "")
	body := page(101, func(i int) map[string]any {
		return map[string]any{"web_url": fmt.Sprintf("%s/g/p%d", gl.srv.URL, i), "last_activity_at": t0.Add(-time.Second)}
	})
	gl.script(http.StatusOK, map[string]string{"X-Next-Page": "2"}, string(body))
	cs, err := New(source(t, "gitlab="+gl.srv.URL, nil), gl.srv.Client(), clock.NewVirtual(t0), 5*time.Minute).Probe(context.Background(), nil)
	var bad *BadAnswer
	if !errors.As(err, &bad) || !strings.Contains(err.Error(), "more than the 100") || len(cs) != 0 {
		t.Errorf("GitLab page of 101: %d changes, %v", len(cs), err)
	}
	gt := newFakeGitea(t, "")
	items := page(51, func(i int) map[string]any {
		return map[string]any{"html_url": fmt.Sprintf("%s/o/r%d", gt.srv.URL, i), "updated_at": t0.Add(-time.Second)}
	})
	gt.script(http.StatusOK, nil, `{"ok":true,"data":`+string(items)+`}`)
	cs, err = New(source(t, "gitea="+gt.srv.URL, nil), gt.srv.Client(), clock.NewVirtual(t0), 5*time.Minute).Probe(context.Background(), nil)
	if !errors.As(err, &bad) || !strings.Contains(err.Error(), "more than the 50") || len(cs) != 0 {
		t.Errorf("Gitea page of 51: %d changes, %v", len(cs), err)
	}
}

// TestOneProbeTakesAtMostMaxChanges: a feed that names more changed repos than one
// probe takes gives MaxChanges; GitHub's next probe goes on from where this one
// stopped.
func TestOneProbeTakesAtMostMaxChanges(t *testing.T) {
	g := newFakeGitHub(t, "ghp", 5000, t0.Add(time.Hour))
	var repos []string
	for i := range MaxChanges + 1000 {
		g.add(fmt.Sprintf("own/r%05d", i), t0.Add(-time.Minute))
		repos = append(repos, fmt.Sprintf("%s/own/r%05d", g.srv.URL, i))
	}
	p := New(source(t, "github="+g.srv.URL, map[string]string{"127.0.0.1": "ghp"}), g.srv.Client(), clock.NewVirtual(t0), 5*time.Minute)
	p.remaining = 1_000_000 // allowance for every batch
	cs, err := p.Probe(context.Background(), repos)
	if err != nil {
		t.Fatal(err)
	}
	if len(cs) != MaxChanges || g.queries != MaxChanges/GitHubBatch {
		t.Fatalf("%d changes from %d queries, want %d from %d", len(cs), g.queries, MaxChanges, MaxChanges/GitHubBatch)
	}
	g.mu.Lock()
	g.asked = nil
	g.mu.Unlock()
	if _, err := p.Probe(context.Background(), repos); err != nil {
		t.Fatal(err)
	}
	if len(g.asked) == 0 || g.asked[0] != fmt.Sprintf("own/r%05d", MaxChanges) {
		t.Fatalf("the next probe began at %v, want own/r%05d", g.asked[:min(1, len(g.asked))], MaxChanges)
	}
}

// TestGitHubPartialErrorsSkipOnlyTheirRepos: GitHub answers a batch holding a repo of
// an organization that enforces SAML SSO with that repo's field null and a FORBIDDEN
// error naming its path, beside the others' data: the others' changes are taken, and
// the next probe asks the next batch.
func TestGitHubPartialErrorsSkipOnlyTheirRepos(t *testing.T) {
	g := newFakeGitHub(t, "ghp", 5000, t0.Add(time.Hour))
	g.saml = map[string]bool{"sso-org": true}
	var repos []string
	for i := range 250 {
		owner := "own"
		if i == 7 {
			owner = "sso-org"
		}
		g.add(fmt.Sprintf("%s/r%03d", owner, i), t0.Add(-time.Minute))
		repos = append(repos, fmt.Sprintf("%s/%s/r%03d", g.srv.URL, owner, i))
	}
	clk := clock.NewVirtual(t0)
	p := New(source(t, "github="+g.srv.URL, map[string]string{"127.0.0.1": "ghp"}), g.srv.Client(), clk, 5*time.Minute)
	p.remaining, p.resetAt = 2, t0.Add(5*time.Minute) // one query a probe (2 × 0.9)
	cs, err := p.Probe(context.Background(), repos)
	if err != nil {
		t.Fatalf("a batch with one SAML-protected repo: %v", err)
	}
	if len(cs) != 99 {
		t.Fatalf("%d changes from the batch, want the 99 others", len(cs))
	}
	for _, c := range cs {
		if strings.Contains(c.URL, "sso-org") {
			t.Fatalf("the forbidden repo was reported: %v", c)
		}
	}
	g.mu.Lock()
	g.asked = nil
	g.mu.Unlock()
	clk.Advance(5 * time.Minute)
	p.remaining, p.resetAt = 2, clk.Now().Add(5*time.Minute)
	if _, err := p.Probe(context.Background(), repos); err != nil {
		t.Fatal(err)
	}
	if len(g.asked) == 0 || g.asked[0] != "own/r100" {
		t.Fatalf("the second probe began at %v, want own/r100", g.asked[:min(1, len(g.asked))])
	}
	// A batch that fails as a whole moves the cursor on too: the batch after it is
	// asked next, not the failing one again and again.
	g.mu.Lock()
	g.asked = nil
	g.mu.Unlock()
	g.script(http.StatusBadGateway, nil, `{"message":"Server Error"}`)
	clk.Advance(5 * time.Minute)
	p.remaining, p.resetAt = 2, clk.Now().Add(5*time.Minute)
	if _, err := p.Probe(context.Background(), repos); err == nil {
		t.Fatal("a 502 was taken for an answer")
	}
	clk.Advance(5 * time.Minute)
	p.remaining, p.resetAt = 2, clk.Now().Add(5*time.Minute)
	if _, err := p.Probe(context.Background(), repos); err != nil {
		t.Fatal(err)
	}
	if len(g.asked) == 0 || g.asked[0] != "own/r000" {
		t.Fatalf("after the failed batch the probe began at %v, want own/r000 (the batch after r200's)", g.asked[:min(1, len(g.asked))])
	}
}

// recorder keeps metric samples.
type recorder struct {
	mu      sync.Mutex
	samples []metrics.Sample
}

func (r *recorder) Record(s ...metrics.Sample) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.samples = append(r.samples, s...)
	return nil
}

func (r *recorder) total(name string) float64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0.0
	for _, s := range r.samples {
		if s.Name == name {
			n += s.Value
		}
	}
	return n
}

// TestFailingFeedStopsCovering: a feed whose probes fail FailuresBeforeUncovered times
// in a row no longer counts as coverage (its repos are polled as usual), says so in the
// log and a metric, and covers again once it answers.
func TestFailingFeedStopsCovering(t *testing.T) {
	gl := newFakeGitLab(t, "")
	gl.add("g/a", t0.Add(-time.Minute))
	clk := clock.NewVirtual(t0)
	var logs bytes.Buffer
	var mu sync.Mutex
	log := slog.New(slog.NewTextHandler(writerFunc(func(p []byte) (int, error) { mu.Lock(); defer mu.Unlock(); return logs.Write(p) }), nil))
	r := NewRunner([]*Prober{New(source(t, "gitlab="+gl.srv.URL, nil), gl.srv.Client(), clk, DefaultPeriod)}, clk, log)
	rec := &recorder{}
	r.Metrics = rec
	repo := gl.srv.URL + "/g/a"
	none := func(Source) []string { return nil }
	sink := func(context.Context, []Change) {}
	r.Tick(context.Background(), none, sink)
	if !r.Covered(repo) {
		t.Fatal("a working feed does not cover its repo")
	}
	for i := range FailuresBeforeUncovered {
		gl.script(http.StatusBadGateway, nil, "upstream down")
		clk.Advance(DefaultPeriod)
		r.Tick(context.Background(), none, sink)
		if want := i+1 < FailuresBeforeUncovered; r.Covered(repo) != want {
			t.Fatalf("after %d failed probes covered = %v, want %v", i+1, !want, want)
		}
	}
	if s := r.Stats(); s.FeedsFailing != 1 || s.Errors != int64(FailuresBeforeUncovered) {
		t.Errorf("stats %+v", s)
	}
	if rec.total(metrics.FeedsUncovered) != 1 {
		t.Errorf("FeedsUncovered = %v, want 1", rec.total(metrics.FeedsUncovered))
	}
	mu.Lock()
	if !strings.Contains(logs.String(), "polled as usual") {
		t.Errorf("no log line says the feed stopped covering:\n%s", logs.String())
	}
	mu.Unlock()
	clk.Advance(DefaultPeriod)
	r.Tick(context.Background(), none, sink)
	if !r.Covered(repo) || r.Stats().FeedsFailing != 0 {
		t.Fatal("a feed that answers again does not cover again")
	}
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }

// TestRechecksAreBoundedByTime: past maxRechecks the second looks due first are
// dropped; the others come due in time order.
func TestRechecksAreBoundedByTime(t *testing.T) {
	var q recheckQueue
	for i := range maxRechecks + 10 {
		q.add(fmt.Sprintf("u%d", i), t0.Add(time.Duration(i)*time.Second))
	}
	q.add("u20", t0.Add(-time.Hour)) // an earlier time never moves a second look earlier
	if q.len() != maxRechecks {
		t.Fatalf("%d second looks kept, want %d", q.len(), maxRechecks)
	}
	due := q.due(t0.Add(25 * time.Second))
	var got []string
	for _, c := range due {
		got = append(got, c.URL)
	}
	if want := "u10 u11 u12 u13 u14 u15 u16 u17 u18 u19 u20 u21 u22 u23 u24 u25"; strings.Join(got, " ") != want {
		t.Fatalf("due %v, want %s", got, want)
	}
}

func BenchmarkRecheckAtTheBound(b *testing.B) {
	var q recheckQueue
	for i := range maxRechecks {
		q.add(fmt.Sprint("u", i), t0.Add(time.Duration(i)*time.Millisecond))
	}
	b.ResetTimer()
	for i := range b.N {
		q.add(fmt.Sprint("n", i), t0.Add(time.Hour+time.Duration(i)*time.Millisecond))
	}
}
