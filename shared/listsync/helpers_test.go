package listsync

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mirrorfleet/mirrorfleet/internal/testkit/gittest"
	"github.com/mirrorfleet/mirrorfleet/internal/testkit/logtest"
	"github.com/mirrorfleet/mirrorfleet/internal/testkit/storetest"
	"github.com/mirrorfleet/mirrorfleet/shared/clock"
	"github.com/mirrorfleet/mirrorfleet/shared/election"
	"github.com/mirrorfleet/mirrorfleet/shared/store"
	"github.com/mirrorfleet/mirrorfleet/shared/store/bolt"
	"github.com/mirrorfleet/mirrorfleet/shared/urlpolicy"
)

var t0 = time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)

// errCrash is the failure countingStore injects, as a crash would.
var errCrash = errors.New("injected crash")

// countingStore wraps the real store, counts every write and injects failures.
type countingStore struct {
	storetest.Store
	mu     sync.Mutex
	writes map[string]int
	// failRecord > 0 fails that many of the next PutListSync applies.
	failRecord int
	// failCreateAt > 0 fails the failCreateAt-th CreateRepo from now (once).
	failCreateAt int
}

func (c *countingStore) count(kind string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.writes == nil {
		c.writes = map[string]int{}
	}
	c.writes[kind]++
}

// total is the number of writes so far.
func (c *countingStore) total() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for _, v := range c.writes {
		n += v
	}
	return n
}

func (c *countingStore) snapshot() map[string]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := map[string]int{}
	for k, v := range c.writes {
		out[k] = v
	}
	return out
}

func (c *countingStore) CreateRepoFenced(ctx context.Context, term int64, r store.Repo) (store.Repo, bool, error) {
	c.count("CreateRepo")
	c.mu.Lock()
	fail := false
	if c.failCreateAt > 0 {
		c.failCreateAt--
		fail = c.failCreateAt == 0
	}
	c.mu.Unlock()
	if fail {
		return store.Repo{}, false, errCrash
	}
	return c.Store.CreateRepoFenced(ctx, term, r)
}

func (c *countingStore) RequestDeleteFenced(ctx context.Context, term int64, id string) error {
	c.count("RequestDelete")
	return c.Store.RequestDeleteFenced(ctx, term, id)
}

func (c *countingStore) RequestSync(ctx context.Context, id string) error {
	c.count("RequestSync")
	return c.Store.RequestSync(ctx, id)
}

func (c *countingStore) Apply(ctx context.Context, term int64, muts []store.Mutation) error {
	c.count("Apply")
	c.mu.Lock()
	fail := false
	if c.failRecord > 0 && slices.ContainsFunc(muts, func(m store.Mutation) bool { _, ok := m.(store.PutListSync); return ok }) {
		c.failRecord--
		fail = true
	}
	c.mu.Unlock()
	if fail {
		return errCrash
	}
	return c.Store.Apply(ctx, term, muts)
}

func (c *countingStore) CASElection(ctx context.Context, v int64, e store.Election) (store.Election, error) {
	c.count("CASElection")
	return c.Store.CASElection(ctx, v, e)
}

// fixture is a list repository served over HTTP on 127.0.0.1, a real bbolt store with a
// real leader term, and a Syncer on a virtual clock.
type fixture struct {
	t    testing.TB
	srv  *gittest.Server
	up   *gittest.Repo
	db   *bolt.Store
	st   *countingStore
	clk  *clock.Virtual
	term int64
	cfg  Config
	s    *Syncer
	logs *logtest.Buffer
}

// policy lets the 127.0.0.1 list server through; list entries are only stored here.
var policy = urlpolicy.Policy{AllowPrivateHosts: true}

func newFixture(t testing.TB, mods ...func(*Config)) *fixture {
	t.Helper()
	srv := gittest.NewServer(t)
	db, err := bolt.OpenWith(filepath.Join(t.TempDir(), "fleet.db"), bolt.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	// A served working repository: a commit is visible at once, with no push to wait for.
	f := &fixture{t: t, srv: srv, up: srv.NewWorkRepo(t, "list"), db: db, st: &countingStore{Store: db},
		clk: clock.NewVirtual(t0), logs: &logtest.Buffer{}}
	// fsync makes each commit cost a few hundred milliseconds on some disks; these
	// repositories live as long as the test.
	gittest.Run(t, srv.Home, f.up.Dir, nil, "config", "core.fsync", "none")
	term, _, err := election.Elector{Store: db, ID: "coord-1", Lease: 24 * time.Hour}.Campaign(context.Background(), f.clk.Now())
	if err != nil {
		t.Fatal(err)
	}
	f.term = term
	f.cfg = Defaults()
	f.cfg.Repo, f.cfg.Dir = f.up.URL(), t.TempDir()
	for _, m := range mods {
		m(&f.cfg)
	}
	f.s = f.newSyncer(f.cfg)
	return f
}

func (f *fixture) newSyncer(cfg Config) *Syncer {
	f.t.Helper()
	s, err := New(cfg, Options{Store: f.st, Policy: policy, Clock: f.clk,
		Log: slog.New(slog.NewTextHandler(f.logs, &slog.HandlerOptions{Level: slog.LevelDebug}))})
	if err != nil {
		f.t.Fatal(err)
	}
	f.t.Cleanup(func() { s.Close() })
	return s
}

// tick advances the clock past the interval and runs the sync, as a coordinator tick.
func (f *fixture) tick() error {
	f.clk.Advance(f.s.cfg.Interval)
	return f.s.SyncList(context.Background(), f.term)
}

func (f *fixture) mustTick() {
	f.t.Helper()
	if err := f.tick(); err != nil {
		f.t.Fatalf("sync: %v\nlogs:\n%s", err, f.logs)
	}
}

// commit replaces repos.txt with lines and returns the commit.
func (f *fixture) commit(lines ...string) string {
	f.t.Helper()
	return f.up.Commit(f.t, "list", map[string][]byte{"repos.txt": []byte(strings.Join(lines, "\n") + "\n")})
}

func (f *fixture) all() []store.Repo {
	f.t.Helper()
	var out []store.Repo
	cursor := ""
	for {
		page, next, err := f.db.ListRepos(context.Background(), cursor, 1000)
		if err != nil {
			f.t.Fatal(err)
		}
		out = append(out, page...)
		if next == "" {
			return out
		}
		cursor = next
	}
}

// live returns the sorted URLs of the repos with source src that are not being deleted.
func (f *fixture) live(src store.Source) []string {
	f.t.Helper()
	var out []string
	for _, r := range f.all() {
		if r.Source == src && r.State != store.RepoDeleting {
			out = append(out, r.URL)
		}
	}
	slices.Sort(out)
	return out
}

func (f *fixture) repo(url string) (store.Repo, bool) {
	f.t.Helper()
	r, err := f.db.GetRepo(context.Background(), store.RepoID(url))
	if errors.Is(err, store.ErrNotFound) {
		return r, false
	}
	if err != nil {
		f.t.Fatal(err)
	}
	return r, true
}

func (f *fixture) state() (store.ListSync, Details) {
	f.t.Helper()
	ls, err := f.db.GetListSync(context.Background())
	if err != nil {
		f.t.Fatal(err)
	}
	d, err := DecodeDetails(ls)
	if err != nil {
		f.t.Fatal(err)
	}
	return ls, d
}

// purgeDeleted removes the repos being deleted, as the coordinator does.
func (f *fixture) purgeDeleted() {
	f.t.Helper()
	for _, r := range f.all() {
		if r.State == store.RepoDeleting {
			if err := f.db.Apply(context.Background(), f.term, []store.Mutation{store.DeleteRepo{ID: r.ID, ExpectEpoch: r.OwnerEpoch}}); err != nil {
				f.t.Fatal(err)
			}
		}
	}
}

// urls returns n public-looking repo URLs (they are only stored, never fetched).
func urls(prefix string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("https://git.example.org/%s/repo-%05d", prefix, i)
	}
	return out
}

func sorted(s []string) []string {
	s = slices.Clone(s)
	slices.Sort(s)
	return s
}

func wantSame(t testing.TB, what string, got, want []string) {
	t.Helper()
	got, want = sorted(got), sorted(want)
	if !slices.Equal(got, want) {
		var missing, extra []string
		for _, w := range want {
			if !slices.Contains(got, w) {
				missing = append(missing, w)
			}
		}
		for _, g := range got {
			if !slices.Contains(want, g) {
				extra = append(extra, g)
			}
		}
		t.Fatalf("%s: %d, want %d; missing %v; unexpected %v", what, len(got), len(want), missing, extra)
	}
}
