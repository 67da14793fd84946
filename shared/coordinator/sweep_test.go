package coordinator

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/mirrorfleet/mirrorfleet/shared/ring"
	"github.com/mirrorfleet/mirrorfleet/shared/store"
)

// laggingIndex hides the repos one tick moved from the owner listings of the next, as an
// eventually consistent index (a DynamoDB GSI) may.
type laggingIndex struct {
	Store
	fresh, hidden map[string]bool
}

func (l *laggingIndex) Apply(ctx context.Context, term int64, muts []store.Mutation) error {
	err := l.Store.Apply(ctx, term, muts)
	if err == nil {
		for _, m := range muts {
			if a, ok := m.(store.AssignRepo); ok {
				l.fresh[a.ID] = true
			}
		}
	}
	return err
}

func (l *laggingIndex) hide(rs []store.Repo) []store.Repo {
	return slices.DeleteFunc(rs, func(r store.Repo) bool { return l.hidden[r.ID] })
}

func (l *laggingIndex) ListReposByOwner(ctx context.Context, owner, cursor string, limit int) ([]store.Repo, string, error) {
	rs, next, err := l.Store.ListReposByOwner(ctx, owner, cursor, limit)
	return l.hide(rs), next, err
}

func (l *laggingIndex) ListReposByOwnerRange(ctx context.Context, owner string, from, to uint64, cursor string, limit int) ([]store.Repo, string, error) {
	rs, next, err := l.Store.ListReposByOwnerRange(ctx, owner, from, to, cursor, limit)
	return l.hide(rs), next, err
}

// nextTick: what this tick moved is hidden from the next one.
func (l *laggingIndex) nextTick() { l.hidden, l.fresh = l.fresh, map[string]bool{} }

// offOwner counts the repos not with the owner the ring gives them.
func (f *tickFleet) offOwner() int {
	f.t.Helper()
	sr, err := f.st.GetRing(f.t.Context())
	if err != nil {
		f.t.Fatal(err)
	}
	rg, err := ring.FromStore(sr)
	if err != nil {
		f.t.Fatal(err)
	}
	n, cursor := 0, ""
	for {
		page, next, err := f.st.ListRepos(f.t.Context(), cursor, 1000)
		if err != nil {
			f.t.Fatal(err)
		}
		for _, r := range page {
			if r.Owner != "" && r.Owner != ownerOf(rg, r, r.Salt) {
				n++
			}
		}
		if next == "" {
			return n
		}
		cursor = next
	}
}

// A join's scan that misses repos moved a tick earlier (the index had not caught up)
// leaves them with the donor; the anti-entropy sweep finds and moves them within its
// period, and counts them.
func TestSweepFindsReposAScanMissed(t *testing.T) {
	const period = 10 * time.Minute
	f := newTickFleet(t, 3, 0, Config{SweepPeriod: period, FirstBatch: 100000})
	lag := &laggingIndex{Store: f.st, fresh: map[string]bool{}}
	f.c.Store = lag
	f.addRepos(1000)
	lag.nextTick()
	if r := f.tick(); r.Assigned != 1000 {
		t.Fatalf("first tick assigned %d, want 1000", r.Assigned)
	}
	lag.nextTick()
	f.addWorker() // its scans read an index that misses every repo of the tick before
	f.tick()
	lag.nextTick()
	stranded := f.offOwner()
	if stranded == 0 {
		t.Fatal("the lagging index hid nothing from the join's scans: the test tests nothing")
	}
	found := 0
	start := f.clk.Now()
	for f.clk.Now().Sub(start) <= period && f.offOwner() > 0 {
		r := f.tick()
		found += r.SweepFound
		lag.nextTick()
	}
	if n := f.offOwner(); n > 0 {
		t.Fatalf("%d of %d repos the join's scans missed still sit off their owner after the sweep period (%v)", n, stranded, period)
	}
	if found < stranded {
		t.Fatalf("the sweep counted %d repos off their owner, want at least the %d stranded", found, stranded)
	}
	sw, err := f.st.GetSweep(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if sw.Found < int64(stranded) {
		t.Fatalf("sweep record counts %d found, want at least %d", sw.Found, stranded)
	}
	t.Logf("%d repos stranded by the join's scans, moved by the sweep within %v", stranded, f.clk.Now().Sub(start))
}

// The pace: a pass of Size repos reads in slices that keep it on course to end within
// three quarters of the period, nothing while less than a slice is due, and on at least
// late a tick once it is past its course.
func TestSweepQuota(t *testing.T) {
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	period := 6 * time.Hour // pace: 4.5 h
	cases := []struct {
		name       string
		size, read int64
		after      time.Duration
		want       int
	}{
		{"1M repos, one 10 s tick in", 1_000_000, 0, 10 * time.Second, 617},
		{"1M repos on course", 1_000_000, 500_000, 135 * time.Minute, 0},
		{"1M repos a tick behind course", 1_000_000, 499_000, 135 * time.Minute, 1000},
		{"100 repos: nothing until all are due", 100, 0, time.Hour, 0},
		{"100 repos at the pace's end", 100, 0, 270 * time.Minute, 1000},
		{"a small slice is not read", 1_000_000, 0, time.Second, 0},
		{"past its course: on at late a tick", 1_000_000, 1_000_000, 5 * time.Hour, 1000},
		{"an empty fleet reads nothing on course", 0, 0, time.Hour, 0},
	}
	for _, c := range cases {
		sw := store.Sweep{PassStart: start, Size: c.size, Read: c.read}
		if got := SweepQuota(sw, start.Add(c.after), period, 1000); got != c.want {
			t.Errorf("%s: quota %d, want %d", c.name, got, c.want)
		}
	}
	// At 1M repos and a 10 s tick, a pass paced this way ends within the period.
	sw := store.Sweep{PassStart: start, Size: 1_000_000}
	now := start
	for sw.Read < sw.Size {
		now = now.Add(10 * time.Second)
		sw.Read += int64(SweepQuota(sw, now, period, 1000))
	}
	if took := now.Sub(start); took > period {
		t.Fatalf("a pass of 1M repos took %v, over the period %v", took, period)
	}
}

func TestNextOwner(t *testing.T) {
	owners := []string{"a", "c", "e"}
	for cur, want := range map[string]string{"": "a", "a": "c", "b": "c", "e": "", "z": ""} {
		if got := nextOwner(owners, cur); got != want {
			t.Errorf("after %q: %q, want %q", cur, got, want)
		}
	}
}
