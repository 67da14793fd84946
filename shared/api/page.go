package api

import (
	"bytes"
	"cmp"
	"fmt"
	"html/template"
	"math"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode"

	"github.com/mirrorfleet/mirrorfleet/shared/metrics"
	"github.com/mirrorfleet/mirrorfleet/shared/ring"
	"github.com/mirrorfleet/mirrorfleet/shared/store"
)

// The status page is rendered on the server, complete without JavaScript; app.js only
// refreshes it in place and adds the copy buttons. Everything from outside (repo URLs,
// errors, worker ids) goes through html/template, which escapes it for where it lands.

// Page query parameters. Others are ignored: browsers and people append things.
const (
	defaultPageLimit = 50
	maxPageLimit     = 500
	maxSearch        = 200
	// failuresRead is how many failing and gone repos the failures panel groups at
	// most (within the scan budget); failuresShown how many of one group it lists.
	failuresRead  = 5000
	failuresShown = 20
)

var pageTmpl = template.Must(template.New("index.html").Funcs(template.FuncMap{
	"age":   fmtAge,
	"time":  fmtTime,
	"bytes": fmtBytes,
	"rows":  func(id string, rs []pageRepo) repoTable { return repoTable{ID: id, Rows: rs} },
	"add":   func(a, b int) int { return a + b },
	"short": func(commit string) string { return commit[:min(12, len(commit))] },
}).ParseFS(uiFS, "ui/index.html"))

// pageQuery is the parsed query of GET /.
type pageQuery struct {
	Q      string
	State  store.RepoState
	Cursor string
	Limit  int
}

// parsePageQuery checks the page's query; a bad value is a 400 that says which and why.
func parsePageQuery(r *http.Request) (pageQuery, error) {
	q, err := parseQuery(r)
	if err != nil {
		return pageQuery{}, err
	}
	pq := pageQuery{Q: strings.TrimSpace(q.Get("q")), Cursor: q.Get("cursor"), Limit: defaultPageLimit}
	bad := func(field, format string, args ...any) (pageQuery, error) {
		e := badRequest("invalid_parameter", format, args...)
		e.Field = field
		return pageQuery{}, e
	}
	if len(pq.Q) > maxSearch || strings.IndexFunc(pq.Q, unicode.IsControl) >= 0 {
		return bad("q", "search %q is longer than %d characters or holds control characters", truncate(pq.Q, 40), maxSearch)
	}
	if v := q.Get("state"); v != "" {
		pq.State = store.RepoState(v)
		if !slices.Contains(repoStates, pq.State) {
			return bad("state", "state %q is not a repo state; one of: %s", truncate(v, 40), joinStates())
		}
	}
	if len(pq.Cursor) > maxCursor || strings.ContainsRune(pq.Cursor, 0) {
		return bad("cursor", "cursor is not one this page made; follow the page's own links")
	}
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > maxPageLimit {
			return bad("limit", "limit %q is not an integer from 1 to %d", truncate(v, 20), maxPageLimit)
		}
		pq.Limit = n
	}
	return pq, nil
}

// match is the search: the state if one is given, and the text in the URL, the id or
// the last error, ignoring case.
func (pq pageQuery) match(r store.Repo) bool {
	if pq.State != "" && r.State != pq.State {
		return false
	}
	if pq.Q == "" {
		return true
	}
	q := strings.ToLower(pq.Q)
	return strings.Contains(strings.ToLower(r.URL), q) || r.ID == q || strings.Contains(strings.ToLower(r.LastError), q)
}

// link is the page URL for this query at cursor.
func (pq pageQuery) link(cursor string) string {
	v := url.Values{}
	if pq.Q != "" {
		v.Set("q", pq.Q)
	}
	if pq.State != "" {
		v.Set("state", string(pq.State))
	}
	if pq.Limit != defaultPageLimit {
		v.Set("limit", strconv.Itoa(pq.Limit))
	}
	if cursor != "" {
		v.Set("cursor", cursor)
	}
	if len(v) == 0 {
		return "/"
	}
	return "/?" + v.Encode()
}

// pageData is what index.html renders.
type pageData struct {
	Locked  bool   // reads need a token the request lacked
	Problem *Error // a bad query or a failure: the page says so instead of the data
	Query   pageQuery
	States  []store.RepoState
	Now     time.Time

	Leader      *store.Election
	RingVersion int64
	ReposTotal  int
	RepoCounts  []stateCount
	Workers     []pageWorker
	WorkerTotal int
	WorkerCount []stateCount
	Staleness   metrics.Staleness
	Ring        pageRing
	Failing     int // repos failing
	Gone        int // repos whose upstream answers "not found"
	// Failures are the failing and gone repos read, grouped by host, state and error
	// kind, the largest group first; FailuresRead is how many repos they hold.
	Failures     []failureGroup
	FailuresRead int
	Repos        []pageRepo
	NextPage     string // link to the next page of the search, "" on the last
	FirstPage    string // link to the first page, "" on it
	Stalest      []pageRepo
	List         ListStatus
	ListError    string
}

// failureGroup is the failures of one kind on one host: hundreds of repos failing
// alike are one row, expandable to the first of them.
type failureGroup struct {
	Host    string
	State   store.RepoState
	Kind    string // the error's kind ("timeout", "auth", ...), "" when it has none
	Count   int
	Example string     // one repo's error message
	Repos   []pageRepo // the first failuresShown of them
	Search  string     // the status page's search for all of them
	ID      string     // element id of its repo table
}

// groupFailures groups failing and gone repos by host, state and error kind.
func groupFailures(rs []pageRepo) []failureGroup {
	type key struct {
		host, kind string
		state      store.RepoState
	}
	idx := map[key]int{}
	var out []failureGroup
	for _, r := range rs {
		k := key{hostOf(r.URL), r.ErrKind, r.State}
		i, ok := idx[k]
		if !ok {
			i = len(out)
			idx[k] = i
			out = append(out, failureGroup{Host: k.host, State: k.state, Kind: k.kind, Example: r.ErrText,
				Search: pageQuery{Q: k.host, State: k.state, Limit: defaultPageLimit}.link("")})
		}
		g := &out[i]
		g.Count++
		if len(g.Repos) < failuresShown {
			g.Repos = append(g.Repos, r)
		}
	}
	slices.SortStableFunc(out, func(a, b failureGroup) int {
		return cmp.Or(cmp.Compare(b.Count, a.Count), cmp.Compare(a.Host, b.Host), cmp.Compare(a.Kind, b.Kind))
	})
	for i := range out {
		out[i].ID = "failures-" + strconv.Itoa(i+1)
	}
	return out
}

// hostOf is the host (and port) of a repo URL, or the URL itself when it has none.
func hostOf(u string) string {
	if p, err := url.Parse(u); err == nil && p.Host != "" {
		return p.Host
	}
	return u
}

// repoTable is one table of repos and its element id.
type repoTable struct {
	ID   string
	Rows []pageRepo
}

type stateCount struct {
	State string
	N     int
	Link  string
}

type pageWorker struct {
	store.Worker
	Colour       string
	Age          time.Duration
	AgeClass     string
	DiskUsed     float64 // fraction of DiskTotal
	HasHeartbeat bool
}

type pageRepo struct {
	store.Repo
	CloneURL   string
	ErrKind    string
	ErrText    string
	StaleFor   time.Duration
	Checked    time.Time     // the last poll, changed or not (last_checked_at)
	CheckedAgo time.Duration //
	NextSync   string        // the worker's estimate, or why there is none
}

type pageRing struct {
	Version int64
	Tokens  int
	Exact   bool
	Warmup  time.Time
	Arcs    []pageArc
	Members []pageMember
}

type pageArc struct {
	D, Fill, Member, Title string
}

type pageMember struct {
	ID, Colour, Share string
}

func (s *server) page(w http.ResponseWriter, r *http.Request) error {
	d := pageData{States: repoStates, Now: s.cfg.Clock.Now()}
	status := http.StatusOK
	pq, err := parsePageQuery(r)
	switch {
	case err != nil:
		d.Problem = s.toError(r, err)
		status = d.Problem.Status
	case s.cfg.ReadsNeedAuth && s.auth(r) != nil:
		// The page stays open but shows no fleet data. A browser cannot send a bearer
		// token on navigation: app.js asks for it and fetches the page again with it.
		d.Locked = true
	default:
		d.Query = pq
		if err := s.pageData(r, &d); err != nil {
			d.Problem = s.toError(r, err)
			status = d.Problem.Status
		}
	}
	var buf bytes.Buffer
	if err := pageTmpl.Execute(&buf, d); err != nil {
		return fmt.Errorf("render status page: %w", err)
	}
	h := w.Header()
	h.Set("Content-Type", "text/html; charset=utf-8")
	h.Set("Content-Security-Policy", pageCSP)
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_, _ = w.Write(buf.Bytes())
	return nil
}

func (s *server) pageData(r *http.Request, d *pageData) error {
	ctx := r.Context()
	f, err := s.readFleet(ctx)
	if err != nil {
		return err
	}
	el, sr, ws, counts, stale := f.election, f.ring, f.workers, f.counts, f.stalest
	if el.Version > 0 {
		d.Leader = &el
	}
	d.RingVersion = sr.Version
	rg, err := ring.FromStore(sr)
	if err != nil {
		return fmt.Errorf("load stored ring version %d: %w", sr.Version, err)
	}
	sc, err := s.schedule(ctx, ws)
	if err != nil {
		return err
	}

	slices.SortFunc(ws, func(a, b store.Worker) int { return cmp.Or(cmp.Compare(a.Slot, b.Slot), cmp.Compare(a.ID, b.ID)) })
	slots := map[string]int{}
	byWorker := map[store.WorkerState]int{}
	for _, wk := range ws {
		slots[wk.ID] = wk.Slot
		byWorker[wk.State]++
		pw := pageWorker{Worker: wk, Colour: slotColour(wk.Slot), HasHeartbeat: !wk.HeartbeatAt.IsZero(), AgeClass: "age-bad"}
		if pw.HasHeartbeat {
			pw.Age = max(0, d.Now.Sub(wk.HeartbeatAt))
			pw.AgeClass = heartbeatClass(pw.Age)
		}
		if wk.DiskTotal > 0 {
			pw.DiskUsed = float64(wk.DiskUsed) / float64(wk.DiskTotal)
		}
		d.Workers = append(d.Workers, pw)
	}
	d.WorkerTotal = len(ws)
	for _, st := range workerStates {
		d.WorkerCount = append(d.WorkerCount, stateCount{State: string(st), N: byWorker[st]})
	}
	for _, st := range repoStates {
		d.RepoCounts = append(d.RepoCounts, stateCount{State: string(st), N: counts[st], Link: pageQuery{State: st, Limit: defaultPageLimit}.link("")})
		d.ReposTotal += counts[st]
	}
	d.Staleness = metrics.MergeStaleness(d.Now, ws)
	d.Ring = pageRingOf(rg, sr, slots)

	for _, rp := range stale {
		d.Stalest = append(d.Stalest, s.pageRepo(rp, d.Now, sc))
	}
	// The failing and gone repos (an upstream that answers "not found" is as much a
	// failure to an operator), found within the scan budget and grouped; the search
	// lists them all.
	d.Failing, d.Gone = counts[store.RepoFailing], counts[store.RepoGone]
	if d.Failing+d.Gone > 0 {
		fails, _, err := s.listMatching(ctx, "", failuresRead, func(r store.Repo) bool { return isFailure(r.State) })
		if err != nil {
			return fmt.Errorf("list failing repos: %w", err)
		}
		rows := make([]pageRepo, 0, len(fails))
		for _, rp := range fails {
			rows = append(rows, s.pageRepo(rp, d.Now, sc))
		}
		d.Failures, d.FailuresRead = groupFailures(rows), len(fails)
	}

	q := d.Query
	var repos []store.Repo
	var next string
	if q.Q == "" && q.State == "" {
		repos, next, err = s.cfg.Store.ListRepos(ctx, q.Cursor, q.Limit)
	} else {
		repos, next, err = s.search(ctx, q)
	}
	if err != nil {
		return fmt.Errorf("list repos: %w", err)
	}
	for _, rp := range repos {
		d.Repos = append(d.Repos, s.pageRepo(rp, d.Now, sc))
	}
	if next != "" {
		d.NextPage = q.link(next)
	}
	if q.Cursor != "" {
		d.FirstPage = q.link("")
	}

	d.List = NotConfiguredListStatus()
	if s.cfg.List != nil {
		if d.List, err = s.cfg.List.ListStatus(ctx); err != nil {
			d.List = NotConfiguredListStatus()
			d.ListError = s.toError(r, err).Message
		}
	}
	return nil
}

// isFailure says whether a repo in state st is listed among the failures: failing, or
// gone (its upstream answers "not found"; retried on the failure cooldown).
func isFailure(st store.RepoState) bool { return st == store.RepoFailing || st == store.RepoGone }

func (s *server) pageRepo(r store.Repo, now time.Time, sc *schedule) pageRepo {
	p := pageRepo{Repo: r}
	if u := s.cloneURL(r.URL); u != nil {
		p.CloneURL = *u
	}
	// Errors are stored as "<kind>: <message>".
	if kind, msg, ok := strings.Cut(r.LastError, ": "); ok && !strings.ContainsAny(kind, " \t") {
		p.ErrKind, p.ErrText = kind, msg
	} else {
		p.ErrText = r.LastError
	}
	// A repo that never succeeded has been without a mirror since it was added.
	since := r.LastSuccessAt
	if since.IsZero() {
		since = r.CreatedAt
	}
	p.StaleFor = max(0, now.Sub(since))
	p.Checked = sc.LastChecked(r)
	p.CheckedAgo = max(0, now.Sub(p.Checked))
	p.NextSync = nextSync(r, now, sc)
	return p
}

// nextSync is when the repo's worker expects to fetch it next, for a page's few rows:
// only its worker knows (no-change polls write nothing), so "—" where none can say.
func nextSync(r store.Repo, now time.Time, sc *schedule) string {
	switch {
	case r.State == store.RepoDeleting:
		return "—"
	case r.Owner == "":
		return "no worker yet"
	}
	at, ok := sc.NextPoll(r)
	if !ok {
		return "—"
	}
	if d := at.Sub(now); d > time.Second {
		return "in " + fmtAge(d)
	}
	return "now"
}

// pageRingOf draws the ring: one SVG path per arc, coloured by the member's slot.
func pageRingOf(rg *ring.Ring, sr store.Ring, slots map[string]int) pageRing {
	out := pageRing{Version: sr.Version, Tokens: rg.NumTokens(), Warmup: sr.WarmupUntil}
	memberSlot := map[string]int{}
	shares := rg.Shares()
	for _, m := range rg.Members() {
		memberSlot[m.ID] = m.Slot
		out.Members = append(out.Members, pageMember{ID: m.ID, Colour: slotColour(m.Slot),
			Share: strconv.FormatFloat(shares[m.ID]*100, 'f', 1, 64) + "%"})
	}
	as, exact := arcs(rg)
	out.Exact = exact
	const R, r = 100.0, 64.0
	for _, a := range as {
		from, to, m := a[0].(float64), a[1].(float64), a[2].(string)
		// A full circle cannot be one SVG arc (start = end): draw it as two halves.
		parts := [][2]float64{{from, to}}
		if to-from >= 0.999 {
			mid := from + (to-from)/2
			parts = [][2]float64{{from, mid}, {mid, to}}
		}
		for _, p := range parts {
			out.Arcs = append(out.Arcs, pageArc{D: arcPath(p[0], p[1], R, r), Fill: slotColour(memberSlot[m]), Member: m,
				Title: fmt.Sprintf("%s: %.2f%% of the circle", m, (p[1]-p[0])*100)})
		}
	}
	return out
}

// arcPath is the SVG path of the ring segment between fractions a and b of the circle,
// clockwise from the top, between radii R and r.
func arcPath(a, b, R, r float64) string {
	pt := func(f, rad float64) string {
		ang := f*2*math.Pi - math.Pi/2
		return fmt.Sprintf("%.3f %.3f", rad*math.Cos(ang), rad*math.Sin(ang))
	}
	large := 0
	if b-a > 0.5 {
		large = 1
	}
	return fmt.Sprintf("M %s A %g %g 0 %d 1 %s L %s A %g %g 0 %d 0 %s Z", pt(a, R), R, R, large, pt(b, R), pt(b, r), r, r, large, pt(a, r))
}

// palette colours workers by slot, so a worker keeps its colour across refreshes and in
// both the ring and the table: categorical colours first (no pure red or green, which
// the page uses for health), then golden-angle hues.
var palette = []string{"#4e79a7", "#f28e2b", "#76b7b2", "#b07aa1", "#edc948", "#9c755f", "#ff9da7", "#59a14f", "#bab0ac", "#e15759"}

func slotColour(slot int) string {
	if slot >= 0 && slot < len(palette) {
		return palette[slot]
	}
	return fmt.Sprintf("hsl(%.0f 55%% 55%%)", math.Mod(float64(slot)*137.508, 360))
}

func heartbeatClass(age time.Duration) string {
	switch {
	case age < 30*time.Second:
		return "age-ok"
	case age < 2*time.Minute:
		return "age-warn"
	}
	return "age-bad"
}

// fmtAge is a duration for people: 4.2s, 10m 0s, 3h 5m, 2d 1h.
func fmtAge(d time.Duration) string {
	s := d.Seconds()
	switch {
	case s < 10:
		return strconv.FormatFloat(s, 'f', 1, 64) + "s"
	case s < 60:
		return strconv.FormatFloat(s, 'f', 0, 64) + "s"
	case s < 3600:
		return fmt.Sprintf("%dm %ds", int(s)/60, int(s)%60)
	case s < 86400:
		return fmt.Sprintf("%dh %dm", int(s)/3600, int(s)%3600/60)
	}
	return fmt.Sprintf("%dd %dh", int(s)/86400, int(s)%86400/3600)
}

func fmtTime(t time.Time) string {
	if t.IsZero() {
		return "never"
	}
	return t.UTC().Format("2006-01-02 15:04:05 UTC")
}

func fmtBytes(n int64) string {
	units := []string{"B", "KiB", "MiB", "GiB", "TiB", "PiB"}
	f, i := float64(n), 0
	for f >= 1024 && i < len(units)-1 {
		f /= 1024
		i++
	}
	if i == 0 {
		return fmt.Sprintf("%d B", n)
	}
	return fmt.Sprintf("%.1f %s", f, units[i])
}
