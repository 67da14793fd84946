package api

import (
	"encoding/json"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/mirrorfleet/mirrorfleet/shared/store"
)

// mirrorzDoc is mirrorz.json as MirrorZ's format defines it (data format v1.x): only
// site.url and site.abbr are mandatory, site.url has no trailing slash, and a mirror's
// status is one main status [SYFPU] then auxiliary ones, each a capital letter and an
// optional unix time.
type mirrorzDoc struct {
	Version float64 `json:"version"`
	Site    struct {
		URL  string `json:"url"`
		Abbr string `json:"abbr"`
		Name string `json:"name"`
	} `json:"site"`
	Info    []json.RawMessage `json:"info"`
	Mirrors []struct {
		Cname    string `json:"cname"`
		Desc     string `json:"desc"`
		URL      string `json:"url"`
		Status   string `json:"status"`
		Upstream string `json:"upstream"`
		Size     string `json:"size"`
	} `json:"mirrors"`
}

var statusPart = regexp.MustCompile(`[A-Z]\d*`)

// mainStatus splits a status into its parts by letter, checking the format's rule: the
// whole string is parts of [A-Z](\d+)?, exactly one of them main.
func mainStatus(t *testing.T, s string) map[byte]int64 {
	t.Helper()
	parts := statusPart.FindAllString(s, -1)
	if strings.Join(parts, "") != s {
		t.Fatalf("status %q is not a concatenation of [A-Z](\\d+)?", s)
	}
	out, mains := map[byte]int64{}, 0
	for _, p := range parts {
		if strings.IndexByte("SYFPU", p[0]) >= 0 {
			mains++
		}
		n, _ := strconv.ParseInt(p[1:], 10, 64)
		out[p[0]] = n
	}
	if mains != 1 {
		t.Fatalf("status %q has %d main statuses, want 1", s, mains)
	}
	return out
}

func TestMirrorzJSON(t *testing.T) {
	off := newEnv(t)
	if r := rawGet(t, off, "/mirrorz.json", true); r.status != 404 || !strings.Contains(string(r.raw), "--site-abbr") {
		t.Fatalf("without a site name: %d %s", r.status, r.raw)
	}

	e := newEnv(t, func(c *Config) {
		c.CloneBaseURL = "https://mirrors.example.org/"
		c.Site = Site{Abbr: "EXAMPLE", Name: "Example mirrors"}
	})
	success := t0.Add(-time.Hour)
	ok := e.seedRepo("https://git.example.org/a/ok.git", store.RepoOK, "w1", success)
	if err := e.store.ReportFetch(t.Context(), ok.ID, "w1", ok.OwnerEpoch, store.FetchReport{State: store.RepoOK,
		LastFetchAt: success, LastSuccessAt: success, SizeBytes: 3 << 20}); err != nil {
		t.Fatal(err)
	}
	e.seedRepo("https://git.example.org/a/failing.git", store.RepoFailing, "w1", success.Add(-24*time.Hour))
	e.seedRepo("https://git.example.org/a/gone.git", store.RepoGone, "w1", time.Time{})
	e.seedRepo("https://git.example.org/a/new.git", store.RepoPending, "", time.Time{})
	e.seedRepo("https://git.example.org/a/cloning.git", store.RepoCloning, "w2", time.Time{})
	e.seedRepo("https://git.example.org/a/full.git", store.RepoOverflow, "", time.Time{})
	e.seedRepo("https://git.example.org/a/bye.git", store.RepoDeleting, "w1", time.Time{})

	r := rawGet(t, e, "/mirrorz.json", false)
	var doc mirrorzDoc
	if err := json.Unmarshal(r.raw, &doc); r.status != 200 || err != nil {
		t.Fatalf("GET /mirrorz.json: %d %v\n%s", r.status, err, r.raw)
	}
	if doc.Version < 1 || doc.Version >= 2 || doc.Site.Abbr != "EXAMPLE" || doc.Site.URL != "https://mirrors.example.org" || doc.Info == nil {
		t.Errorf("version %v, site %+v, info %v", doc.Version, doc.Site, doc.Info)
	}
	by := map[string]map[byte]int64{}
	for _, m := range doc.Mirrors {
		if !strings.HasPrefix(m.URL, doc.Site.URL+"/git/") || m.Upstream == "" || !strings.HasSuffix(m.URL, m.Cname) {
			t.Errorf("mirror %+v: url not under the site, or no upstream", m)
		}
		by[m.Cname] = mainStatus(t, m.Status)
	}
	if len(doc.Mirrors) != 6 || by["git.example.org/a/bye.git"] != nil {
		t.Errorf("%d mirrors (a deleting repo listed: %v), want the 6 others", len(doc.Mirrors), by["git.example.org/a/bye.git"] != nil)
	}
	for name, want := range map[string]map[byte]int64{
		"git.example.org/a/ok.git":      {'S': success.Unix()},
		"git.example.org/a/failing.git": {'O': success.Add(-24 * time.Hour).Unix()},
		"git.example.org/a/new.git":     {'U': 0, 'N': t0.Add(-48 * time.Hour).Unix()},
		"git.example.org/a/cloning.git": {'Y': 0, 'N': t0.Add(-48 * time.Hour).Unix()},
		"git.example.org/a/full.git":    {'P': 0},
	} {
		got := by[name]
		for k, v := range want {
			if n, present := got[k]; !present || n != v {
				t.Errorf("%s: status %v, want %c%d", name, got, k, v)
			}
		}
	}
	for _, name := range []string{"git.example.org/a/failing.git", "git.example.org/a/gone.git"} {
		if _, failed := by[name]['F']; !failed {
			t.Errorf("%s: status %v, want F", name, by[name])
		}
	}
	if _, old := by["git.example.org/a/gone.git"]['O']; old {
		t.Error("a repo that never succeeded has an O (last success)")
	}

	// Paged like /tunasync.json: every mirror once, each page a whole document.
	seen := 0
	next := "/mirrorz.json?limit=2"
	for pages := 0; next != ""; pages++ {
		if pages > 10 {
			t.Fatal("paging does not end")
		}
		r := rawGet(t, e, next, false)
		var page mirrorzDoc
		if err := json.Unmarshal(r.raw, &page); err != nil || page.Site.Abbr != "EXAMPLE" {
			t.Fatalf("%s: %v\n%s", next, err, r.raw)
		}
		seen += len(page.Mirrors)
		next = ""
		if l := r.header.Get("Link"); l != "" {
			next = strings.TrimSuffix(strings.TrimPrefix(l, "<"), `>; rel="next"`)
		}
	}
	if seen != 6 {
		t.Errorf("the pages hold %d mirrors, want 6", seen)
	}
}
