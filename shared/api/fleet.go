package api

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"path"
	"slices"
	"time"

	"github.com/mirrorfleet/mirrorfleet/shared/ring"
	"github.com/mirrorfleet/mirrorfleet/shared/store"
)

// Worker is a worker as GET /v1/workers shows it.
type Worker struct {
	ID                  string            `json:"id"`
	Slot                int               `json:"slot"`
	State               store.WorkerState `json:"state"`
	StartedAt           *time.Time        `json:"started_at"`
	HeartbeatAt         *time.Time        `json:"heartbeat_at"`
	HeartbeatAgeSeconds *float64          `json:"heartbeat_age_seconds"`
	DiskUsed            int64             `json:"disk_used"`
	DiskTotal           int64             `json:"disk_total"`
	Fetching            int               `json:"fetching"`
	QueueLen            int               `json:"queue_len"`
}

var workerStates = []store.WorkerState{
	store.WorkerJoining, store.WorkerActive, store.WorkerSuspect, store.WorkerDead, store.WorkerDraining,
}

func (s *server) listWorkers(w http.ResponseWriter, r *http.Request) error {
	ws, err := s.cfg.Store.ListWorkers(r.Context())
	if err != nil {
		return fmt.Errorf("list workers: %w", err)
	}
	slices.SortFunc(ws, func(a, b store.Worker) int { return cmp.Or(cmp.Compare(a.Slot, b.Slot), cmp.Compare(a.ID, b.ID)) })
	now := s.cfg.Clock.Now()
	out := make([]Worker, 0, len(ws))
	for _, wk := range ws {
		j := Worker{
			ID: wk.ID, Slot: wk.Slot, State: wk.State, StartedAt: optTime(wk.StartedAt), HeartbeatAt: optTime(wk.HeartbeatAt),
			DiskUsed: wk.DiskUsed, DiskTotal: wk.DiskTotal, Fetching: wk.Fetching, QueueLen: wk.QueueLen,
		}
		if !wk.HeartbeatAt.IsZero() {
			j.HeartbeatAgeSeconds = ptr(seconds(now.Sub(wk.HeartbeatAt)))
		}
		out = append(out, j)
	}
	writeJSON(w, http.StatusOK, WorkerList{Workers: out})
	return nil
}

// WorkerList is the answer of GET /v1/workers, by slot.
type WorkerList struct {
	Workers []Worker `json:"workers"`
}

// seconds rounds to milliseconds: more digits are noise for a heartbeat age.
func seconds(d time.Duration) float64 { return float64(d.Milliseconds()) / 1000 }

func ptr[T any](v T) *T { return &v }

// RingMember is one member of the ring and its share of the hash space.
type RingMember struct {
	ID    string  `json:"id"`
	Slot  int     `json:"slot"`
	Share float64 `json:"share"`
}

// arc is [start_fraction, end_fraction, member] as a JSON array, to keep large rings
// compact.
type arc [3]any

// Ring is the answer of GET /v1/ring.
type Ring struct {
	Version     int64        `json:"version"`
	Hash        string       `json:"hash"`
	Members     []RingMember `json:"members"`
	Tokens      int          `json:"tokens"`
	WarmupUntil *time.Time   `json:"warmup_until"`
	Arcs        []arc        `json:"arcs"`
	ArcsExact   bool         `json:"arcs_exact"`
}

// maxArcs caps the arcs /v1/ring returns: half a degree each is finer than a drawing
// shows, and a 1000-worker ring has ~60k tokens.
const maxArcs = 720

func (s *server) getRing(w http.ResponseWriter, r *http.Request) error {
	sr, err := s.cfg.Store.GetRing(r.Context())
	if err != nil {
		return fmt.Errorf("get ring: %w", err)
	}
	rg, err := ring.FromStore(sr)
	if err != nil {
		return fmt.Errorf("load stored ring version %d: %w", sr.Version, err)
	}
	shares := rg.Shares()
	out := Ring{
		Version: sr.Version, Hash: sr.Hash, Members: []RingMember{}, Tokens: rg.NumTokens(),
		WarmupUntil: optTime(sr.WarmupUntil),
	}
	for _, m := range rg.Members() {
		out.Members = append(out.Members, RingMember{ID: m.ID, Slot: m.Slot, Share: shares[m.ID]})
	}
	out.Arcs, out.ArcsExact = arcs(rg)
	writeJSON(w, http.StatusOK, out)
	return nil
}

// arcs returns the ring as arcs tiling [0, 1), in order, each owned by one member and
// adjacent arcs owned by different members. With more than maxArcs runs it samples the
// owner at maxArcs evenly spaced points instead (exact = false): right in proportion,
// approximate in detail.
func arcs(rg *ring.Ring) (out []arc, exact bool) {
	out = []arc{}
	toks := rg.Tokens() // FromStore merged runs of one owner, so neighbours differ
	switch {
	case len(toks) == 0:
		return out, true
	case len(toks) == 1:
		return append(out, arc{0.0, 1.0, toks[0].Member}), true
	case len(toks) <= maxArcs:
		// Token i owns (pos[i-1], pos[i]]; token 0 also owns the wrap past the top.
		frac := func(p uint64) float64 { return float64(p) / (1 << 64) }
		out = append(out, arc{0.0, frac(toks[0].Pos), toks[0].Member})
		for i := 1; i < len(toks); i++ {
			out = append(out, arc{frac(toks[i-1].Pos), frac(toks[i].Pos), toks[i].Member})
		}
		return append(out, arc{frac(toks[len(toks)-1].Pos), 1.0, toks[0].Member}), true
	}
	step := ^uint64(0) / maxArcs
	for b := range uint64(maxArcs) {
		owner, _ := rg.Owner(b*step + step/2)
		start := float64(b) / maxArcs
		if n := len(out); n > 0 && out[n-1][2] == owner {
			out[n-1][1] = float64(b+1) / maxArcs
			continue
		}
		out = append(out, arc{start, float64(b+1) / maxArcs, owner})
	}
	out[len(out)-1][1] = 1.0
	return out, false
}

// Status is the answer of GET /v1/status.
type Status struct {
	Now time.Time `json:"now"`
	// Leader is null until a coordinator has campaigned.
	Leader         *Leader                   `json:"leader"`
	RingVersion    int64                     `json:"ring_version"`
	WorkersByState map[store.WorkerState]int `json:"workers_by_state"`
	ReposByState   map[store.RepoState]int   `json:"repos_by_state"`
	ReposTotal     int                       `json:"repos_total"`
	Stalest        []StaleRepo               `json:"stalest"`
}

// Leader is the coordinator that holds the lease.
type Leader struct {
	ID         string     `json:"id"`
	Term       int64      `json:"term"`
	LeaseUntil *time.Time `json:"lease_until"`
}

// stalestShown is how many repos /v1/status lists as stalest.
const stalestShown = 20

// StaleRepo is one of the stalest repos of GET /v1/status.
type StaleRepo struct {
	ID            string          `json:"id"`
	URL           string          `json:"url"`
	Upstream      string          `json:"upstream"` // the URL it was added with, fetched as is
	State         store.RepoState `json:"state"`
	Owner         *string         `json:"owner"`
	LastSuccessAt *time.Time      `json:"last_success_at"`
	AgeSeconds    float64         `json:"age_seconds"`
	LastError     string          `json:"last_error"`
	CloneURL      *string         `json:"clone_url"`
}

// fleetState is what /v1/status and the status page both read.
type fleetState struct {
	election store.Election
	ring     store.Ring
	workers  []store.Worker
	counts   map[store.RepoState]int
	stalest  []store.Repo
}

func (s *server) readFleet(ctx context.Context) (fleetState, error) {
	var f fleetState
	var err error
	if f.election, err = s.cfg.Store.GetElection(ctx); err != nil {
		return f, fmt.Errorf("get election: %w", err)
	}
	if f.ring, err = s.cfg.Store.GetRing(ctx); err != nil {
		return f, fmt.Errorf("get ring: %w", err)
	}
	if f.workers, err = s.cfg.Store.ListWorkers(ctx); err != nil {
		return f, fmt.Errorf("list workers: %w", err)
	}
	if f.counts, err = s.cfg.Store.CountRepos(ctx); err != nil {
		return f, fmt.Errorf("count repos: %w", err)
	}
	if f.stalest, err = s.cfg.Store.ListStalest(ctx, stalestShown); err != nil {
		return f, fmt.Errorf("list stalest repos: %w", err)
	}
	return f, nil
}

func (s *server) getStatus(w http.ResponseWriter, r *http.Request) error {
	f, err := s.readFleet(r.Context())
	if err != nil {
		return err
	}
	el, sr, ws, counts, stale := f.election, f.ring, f.workers, f.counts, f.stalest
	now := s.cfg.Clock.Now()

	var leader *Leader
	if el.Version > 0 {
		leader = &Leader{ID: el.VotedFor, Term: el.Term, LeaseUntil: optTime(el.LeaseUntil)}
	}
	byWorker := map[store.WorkerState]int{}
	for _, st := range workerStates {
		byWorker[st] = 0
	}
	for _, wk := range ws {
		byWorker[wk.State]++
	}
	byRepo := map[store.RepoState]int{}
	for _, st := range repoStates {
		byRepo[st] = 0
	}
	total := 0
	for st, n := range counts {
		byRepo[st] += n
		total += n
	}
	stalest := make([]StaleRepo, 0, len(stale))
	for _, rp := range stale {
		// A repo that never succeeded has been without a mirror since it was added.
		since := rp.LastSuccessAt
		if since.IsZero() {
			since = rp.CreatedAt
		}
		stalest = append(stalest, StaleRepo{
			ID: rp.ID, URL: rp.URL, Upstream: rp.FetchURL(), State: rp.State, Owner: optString(rp.Owner),
			LastSuccessAt: optTime(rp.LastSuccessAt), AgeSeconds: max(0, seconds(now.Sub(since))), LastError: rp.LastError,
			CloneURL: s.cloneURL(rp.URL),
		})
	}
	// The store orders repos that never succeeded by id; shown, the one waiting longest
	// comes first, and equal ages read in URL order.
	slices.SortStableFunc(stalest, func(a, b StaleRepo) int {
		return cmp.Or(cmp.Compare(b.AgeSeconds, a.AgeSeconds), cmp.Compare(a.URL, b.URL))
	})
	writeJSON(w, http.StatusOK, Status{Now: now.UTC(), Leader: leader, RingVersion: sr.Version,
		WorkersByState: byWorker, ReposByState: byRepo, ReposTotal: total, Stalest: stalest})
	return nil
}

// ---- documents ----

func (s *server) openapi(w http.ResponseWriter, _ *http.Request) error {
	w.Header().Set("Content-Type", "application/yaml; charset=utf-8")
	_, _ = w.Write(openapiYAML)
	return nil
}

// The status page (page.go) and its assets: no build step. The CSP allows only our own
// script, styles, fetches and the search form.
const pageCSP = "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; img-src 'self' data:; base-uri 'none'; form-action 'self'; frame-ancestors 'none'"

func (s *server) asset(w http.ResponseWriter, r *http.Request) error {
	name := r.PathValue("file")
	if name == "index.html" || !fs.ValidPath(name) || path.Dir(name) != "." {
		return &Error{Status: http.StatusNotFound, Code: "not_found", Message: fmt.Sprintf("no status page asset %q", truncate(name, 64))}
	}
	return s.serveUI(w, name)
}

// uiTypes is fixed rather than mime.TypeByExtension, which reads the host's mime.types.
var uiTypes = map[string]string{
	".html": "text/html; charset=utf-8",
	".js":   "text/javascript; charset=utf-8",
	".css":  "text/css; charset=utf-8",
	".svg":  "image/svg+xml",
}

func (s *server) serveUI(w http.ResponseWriter, name string) error {
	b, err := uiFS.ReadFile("ui/" + name)
	if err != nil {
		return &Error{Status: http.StatusNotFound, Code: "not_found", Message: fmt.Sprintf("no status page asset %q", truncate(name, 64))}
	}
	ct, ok := uiTypes[path.Ext(name)]
	if !ok {
		ct = "application/octet-stream"
	}
	h := w.Header()
	h.Set("Content-Type", ct)
	h.Set("Content-Security-Policy", pageCSP)
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Cache-Control", "no-cache")
	_, _ = w.Write(b)
	return nil
}

// backup streams a consistent copy of the store (GET /v1/backup). It needs the token
// like a write, as the copy holds every record.
func (s *server) backup(w http.ResponseWriter, r *http.Request) error {
	if s.cfg.Backup == nil {
		return &Error{Status: http.StatusNotFound, Code: "not_found",
			Message: "this server keeps no store file to copy (on AWS, use DynamoDB's point-in-time recovery)"}
	}
	h := w.Header()
	h.Set("Content-Type", "application/octet-stream")
	h.Set("Content-Disposition", `attachment; filename="mirrorfleet.db"`)
	h.Set("Cache-Control", "no-store")
	// A large store takes a while: the write deadline moves with each chunk written.
	rc := http.NewResponseController(w)
	if _, err := s.cfg.Backup(r.Context(), deadlineWriter{w: w, rc: rc}); err != nil {
		// Too late for an error status once bytes went out: the CLI checks the copy.
		s.log.Warn("backup", "err", err)
	}
	return nil
}

// deadlineWriter gives each write 30 s, so a client that keeps reading is never cut.
type deadlineWriter struct {
	w  io.Writer
	rc *http.ResponseController
}

func (d deadlineWriter) Write(p []byte) (int, error) {
	_ = d.rc.SetWriteDeadline(time.Now().Add(30 * time.Second))
	return d.w.Write(p)
}
