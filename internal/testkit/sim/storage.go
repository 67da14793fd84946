package sim

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"time"

	"github.com/mirrorfleet/mirrorfleet/shared/clock"
	"github.com/mirrorfleet/mirrorfleet/shared/fetch"
)

// Upstream is a fake upstream repository whose history is data: the times of its commits.
type Upstream struct {
	URL     string
	Commits []time.Time // ascending
	Missing bool        // answers "not found"
	Flaky   float64     // share of fetches that fail with a network error (deterministic)
}

// headAt is how many commits exist at t.
func (u *Upstream) headAt(t time.Time) int {
	return sort.Search(len(u.Commits), func(i int) bool { return u.Commits[i].After(t) })
}

type mirrorCopy struct {
	head       int       // commits mirrored
	lastCommit time.Time // time of the newest mirrored commit
	trashed    bool
}

type lock struct {
	until time.Time
	by    string
}

// FetchEvent is one completed fake fetch.
type FetchEvent struct {
	Worker  string
	URL     string
	Start   time.Time
	End     time.Time
	Changed bool
	Lag     time.Duration // age of the oldest commit this fetch brought in
}

// Storage is the fake shared mirror storage all simulated workers mount (EFS in
// production): mirrors live here by URL, and a per-repo lock with a lease of the fetch's
// duration keeps two workers from fetching one repo at once.
type Storage struct {
	mu        sync.Mutex
	clock     clock.Clock
	upstreams map[string]*Upstream
	mirrors   map[string]*mirrorCopy
	locks     map[string]lock
	duration  time.Duration
	fetchSeq  int

	last       map[string]FetchEvent // the latest fetch per URL
	Fetches    int
	Violations []string // broken invariants seen by the storage (4 and 5)
	OnFetch    func(FetchEvent)

	// kill, if set, is asked at each stage of a sync whether the node dies there.
	kill      func(node string, stage Stage, clone bool) bool
	clone     map[string]bool // per node: whether its latest sync was a clone
	syncs     map[string]int  // per node: syncs completed
	temps     map[string]int  // per node: syncs killed with their pack (or clone) written aside
	TempsLeft int             // temp files removed at restarts: what killed syncs left
}

// NewStorage returns empty shared storage on clk; each fetch takes d of simulated time.
func NewStorage(clk clock.Clock, d time.Duration) *Storage {
	return &Storage{clock: clk, upstreams: map[string]*Upstream{}, mirrors: map[string]*mirrorCopy{},
		locks: map[string]lock{}, last: map[string]FetchEvent{}, duration: d, clone: map[string]bool{}, syncs: map[string]int{}, temps: map[string]int{}}
}

// AddUpstream registers an upstream repository.
func (s *Storage) AddUpstream(u *Upstream) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.upstreams[u.URL] = u
}

// Upstream returns the upstream at url.
func (s *Storage) Upstream(url string) *Upstream {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.upstreams[url]
}

// Duration is how long one fetch takes.
func (s *Storage) Duration() time.Duration { return s.duration }

// Mirrored returns how many commits of url are mirrored and whether a mirror exists.
func (s *Storage) Mirrored(url string) (int, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	m, ok := s.mirrors[url]
	if !ok || m.trashed {
		return 0, false
	}
	return m.head, true
}

// For returns the Mirrorer view of one worker process.
func (s *Storage) For(node string) *View { return &View{s: s, node: node} }

// View is one worker process's handle on the shared storage; it implements worker.Mirrorer.
type View struct {
	s    *Storage
	node string
}

// Exists reports whether a mirror of t exists.
func (v *View) Exists(t fetch.Target) bool {
	_, ok := v.s.Mirrored(t.URL)
	return ok
}

// errKilled is what a sync returns to a worker killed in it (nobody reads it).
var errKilled = &fetch.Error{Kind: fetch.KindOther, Err: fmt.Errorf("process killed")}

// Sync mirrors t as of now; it holds the repo's lock for the fetch's duration. Its
// stages are those of a real sync (Stage); a worker killed at one leaves what a real
// one would: a lock held until its lease lapses, a temp file, a mirror updated but not
// reported.
func (v *View) Sync(_ context.Context, t fetch.Target) (fetch.Result, error) {
	s := v.s
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.clock.Now()
	who := v.node
	prev, had := s.mirrors[t.URL]
	clone := !had || prev.trashed
	s.clone[who] = clone
	dies := func(st Stage) bool { return s.kill != nil && s.kill(who, st, clone) }
	if dies(StagePopped) {
		return fetch.Result{}, errKilled
	}
	if l, ok := s.locks[t.URL]; ok && l.until.After(now) {
		return fetch.Result{}, &fetch.Error{Kind: fetch.KindBusy, Err: fmt.Errorf("locked by %s", l.by)}
	}
	end := now.Add(s.duration)
	if e, ok := s.last[t.URL]; ok && e.End.After(now) {
		s.Violations = append(s.Violations, fmt.Sprintf("%s: fetched by %s and %s at once", t.URL, e.Worker, who))
	}
	s.locks[t.URL] = lock{until: end, by: who}
	if dies(StageLocked) {
		return fetch.Result{}, errKilled
	}
	u := s.upstreams[t.URL]
	if u == nil || u.Missing {
		return fetch.Result{}, &fetch.Error{Kind: fetch.KindNotFound, Err: fmt.Errorf("repository %s not found", t.URL)}
	}
	s.fetchSeq++
	if u.Flaky > 0 && float64(hash64(fmt.Sprint(t.URL, s.fetchSeq))%1000)/1000 < u.Flaky {
		return fetch.Result{}, &fetch.Error{Kind: fetch.KindNetwork, Err: fmt.Errorf("connection reset")}
	}
	head := u.headAt(now)
	if dies(StageTransferred) {
		s.temps[who]++
		return fetch.Result{}, errKilled
	}
	m, ok := s.mirrors[t.URL]
	cloned := !ok || m.trashed
	if cloned {
		m = &mirrorCopy{}
		s.mirrors[t.URL] = m
	}
	if head < m.head {
		s.Violations = append(s.Violations, fmt.Sprintf("%s: mirror went back from %d to %d commits", t.URL, m.head, head))
	}
	ev := FetchEvent{Worker: who, URL: t.URL, Start: now, End: end, Changed: cloned || head != m.head}
	if head > m.head {
		ev.Lag = now.Sub(u.Commits[m.head])
	}
	m.head = head
	if head > 0 {
		m.lastCommit = u.Commits[head-1]
	}
	s.last[t.URL] = ev
	s.Fetches++
	if s.OnFetch != nil {
		s.OnFetch(ev)
	}
	if dies(StageUpdated) {
		return fetch.Result{}, errKilled
	}
	s.syncs[who]++
	return fetch.Result{Cloned: cloned, Changed: ev.Changed, LastCommitAt: m.lastCommit, SizeBytes: int64(head) * 1000}, nil
}

// lastWasClone reports whether node's latest sync was a clone.
func (s *Storage) lastWasClone(node string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.clone[node]
}

// syncsOf is how many syncs node has completed.
func (s *Storage) syncsOf(node string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.syncs[node]
}

// cleanTemps removes what node's killed syncs left aside.
func (s *Storage) cleanTemps(node string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.TempsLeft += s.temps[node]
	delete(s.temps, node)
}

// Trash marks the mirror deleted (the lazy delete's rename).
func (v *View) Trash(_ context.Context, t fetch.Target) error {
	v.s.mu.Lock()
	defer v.s.mu.Unlock()
	if m, ok := v.s.mirrors[t.URL]; ok {
		m.trashed = true
	}
	return nil
}

// Disk is a fake file system usage gauge.
type Disk struct {
	mu          sync.Mutex
	used, total int64
}

// NewDisk returns a disk with the given usage.
func NewDisk(used, total int64) *Disk { return &Disk{used: used, total: total} }

// Set changes the usage.
func (d *Disk) Set(used, total int64) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.used, d.total = used, total
}

// Usage reports the usage.
func (d *Disk) Usage(context.Context) (int64, int64, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.used, d.total, nil
}

// hash64 is FNV-1a: a cheap deterministic hash for fake randomness.
func hash64(s string) uint64 {
	h := uint64(14695981039346656037)
	for i := 0; i < len(s); i++ {
		h ^= uint64(s[i])
		h *= 1099511628211
	}
	return h
}
