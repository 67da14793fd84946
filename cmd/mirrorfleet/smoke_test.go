package main

import (
	"strings"
	"testing"
	"time"

	"github.com/mirrorfleet/mirrorfleet/internal/testkit/gittest"
)

// The smoke check `make smoke` runs after a deploy, against a local fleet: it adds a
// repo of a local git server through the API, waits until it is ok, clones it through
// the fleet's serving URL and finds the clone in the front's metrics. Against a repo
// the fleet cannot mirror it fails within its timeout, saying why.
func TestSmoke(t *testing.T) {
	t.Parallel()
	srv := gittest.NewServer(t)
	up := srv.NewRepo(t, "team/smoke")
	up.Commit(t, "init", map[string][]byte{"README": []byte("smoke\n")})
	up.Tag(t, "v1", "")
	p := startFleet(t, "smoke", t.TempDir(), e2eToken, "--allow-private-hosts")
	p.waitRing(t, 3)

	out, _ := p.mustCLI(t, "smoke", "--repo", up.URL(), "--timeout", "90s")
	for _, want := range []string{"smoke: added " + up.URL(), " is ok after ", "smoke: cloned " + p.base + "/git/",
		" refs, connected", "smoke: " + p.base + "/metrics: mirrorfleet_serve_requests_total ", "smoke: passed in "} {
		if !strings.Contains(out, want) {
			t.Errorf("smoke output lacks %q:\n%s", want, out)
		}
	}

	// A repo that does not exist upstream never gets ok: the check fails, in its time.
	begin := time.Now()
	out, errOut, code := p.cli(t, "smoke", "--repo", srv.URL+"/team/missing", "--timeout", "5s")
	if code == 0 || !strings.Contains(errOut, "smoke: ") || !strings.Contains(errOut, "is still") || time.Since(begin) > 30*time.Second {
		t.Errorf("smoke of a missing repo: exit %d after %s\nstdout:\n%s\nstderr:\n%s", code, time.Since(begin), out, errOut)
	}
	// Without --repo it says what it needs.
	if _, errOut, code := p.cli(t, "smoke"); code == 0 || !strings.Contains(errOut, "--repo") {
		t.Errorf("smoke without --repo: exit %d: %s", code, errOut)
	}
}
