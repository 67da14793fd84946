package worker

import (
	"errors"
	"testing"
	"time"

	"github.com/mirrorfleet/mirrorfleet/shared/fetch"
	"github.com/mirrorfleet/mirrorfleet/shared/priority"
	"github.com/mirrorfleet/mirrorfleet/shared/store"
)

// fixedPolicy gives every repo the next priority old+1, so the table reads the rest.
type fixedPolicy struct{}

func (fixedPolicy) Name() string                   { return "fixed" }
func (fixedPolicy) Next(in priority.Input) float64 { return in.Old + 1 }

func TestFetchOutcome(t *testing.T) {
	cfg := Config{MinInterval: 5 * time.Minute, Checkpoint: 6 * time.Hour, FailAfter: 3, BackoffBase: time.Minute,
		BackoffMax: time.Hour, FailCooldown: 24 * time.Hour, BusyRetry: 30 * time.Second, MaintainPacks: 16, Policy: fixedPolicy{}}
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	ok := store.Repo{ID: "r", State: store.RepoOK, LastSuccessAt: now.Add(-time.Hour), SizeBytes: 10}
	failing := ok
	failing.State, failing.FetchFailCnt, failing.LastError = store.RepoOK, 2, "network: x"
	retry := &fetch.Error{Kind: fetch.KindRateLimited, RetryAfter: 2 * time.Hour, Err: errors.New("429")}

	cases := []struct {
		name      string
		rec       store.Repo
		f         fetchFacts
		state     store.RepoState
		fails     int // FetchFailCnt + CloneFailCnt after
		notBefore time.Duration
		write     bool
		failed    bool
		maintain  bool
	}{
		{name: "no change within the checkpoint writes nothing", rec: ok, f: fetchFacts{WasCloned: true, LastWritten: now.Add(-time.Hour)},
			state: store.RepoOK, notBefore: 5 * time.Minute},
		{name: "no change past the checkpoint writes", rec: ok, f: fetchFacts{WasCloned: true, LastWritten: now.Add(-7 * time.Hour)},
			state: store.RepoOK, notBefore: 5 * time.Minute, write: true},
		{name: "an unwritten earlier report writes", rec: ok, f: fetchFacts{WasCloned: true, Unwritten: true, LastWritten: now},
			state: store.RepoOK, notBefore: 5 * time.Minute, write: true},
		{name: "a change writes and may call for maintenance", rec: ok, f: fetchFacts{WasCloned: true, LastWritten: now,
			Res: fetch.Result{Changed: true, Packs: 16}}, state: store.RepoOK, notBefore: 5 * time.Minute, write: true, maintain: true},
		{name: "a success after failures clears them and writes", rec: failing, f: fetchFacts{WasCloned: true, LastWritten: now},
			state: store.RepoOK, notBefore: 5 * time.Minute, write: true},
		{name: "a third failure is failing, retried on the cooldown", rec: failing, f: fetchFacts{WasCloned: true, Err: fetch.Errorf(fetch.KindNetwork, "x")},
			state: store.RepoFailing, fails: 3, notBefore: 24 * time.Hour, write: true, failed: true},
		{name: "a first failure backs off by the base, no less than the minimum", rec: ok, f: fetchFacts{WasCloned: true, Err: fetch.Errorf(fetch.KindTimeout, "x")},
			state: store.RepoOK, fails: 1, notBefore: 5 * time.Minute, write: true, failed: true},
		{name: "a clone failure is failing at once", rec: store.Repo{ID: "r", State: store.RepoCloning}, f: fetchFacts{Err: fetch.Errorf(fetch.KindNetwork, "x")},
			state: store.RepoFailing, fails: 1, notBefore: 5 * time.Minute, write: true, failed: true},
		{name: "not found is gone", rec: ok, f: fetchFacts{WasCloned: true, Err: fetch.Errorf(fetch.KindNotFound, "x")},
			state: store.RepoGone, fails: 1, notBefore: 24 * time.Hour, write: true, failed: true},
		{name: "Retry-After beyond the back-off wins", rec: ok, f: fetchFacts{WasCloned: true, Err: retry},
			state: store.RepoOK, fails: 1, notBefore: 2 * time.Hour, write: true, failed: true},
		{name: "corrupt calls for maintenance", rec: ok, f: fetchFacts{WasCloned: true, Err: fetch.Errorf(fetch.KindCorrupt, "x")},
			state: store.RepoOK, fails: 1, notBefore: 5 * time.Minute, write: true, failed: true, maintain: true},
		{name: "busy records nothing and looks again soon", rec: ok, f: fetchFacts{WasCloned: true, Err: fetch.Errorf(fetch.KindBusy, "x")},
			state: store.RepoOK, notBefore: 30 * time.Second},
		{name: "disk full is no failure, written once", rec: ok, f: fetchFacts{WasCloned: true, Err: fetch.Errorf(fetch.KindDiskFull, "x")},
			state: store.RepoOK, notBefore: 5 * time.Minute, write: true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			c.f.Now, c.f.OldPrio = now, 10
			o := fetchOutcome(&cfg, priority.DefaultPrior(), &c.f, &c.rec)
			if c.rec.State != c.state {
				t.Errorf("state %q, want %q", c.rec.State, c.state)
			}
			if n := c.rec.FetchFailCnt + c.rec.CloneFailCnt; n != c.fails {
				t.Errorf("failures %d, want %d", n, c.fails)
			}
			if d := o.NotBefore.Sub(now); d != c.notBefore {
				t.Errorf("next poll after %v, want %v", d, c.notBefore)
			}
			if o.Write != c.write || o.Failed != c.failed || o.Maintain != c.maintain {
				t.Errorf("write %v failed %v maintain %v, want %v %v %v", o.Write, o.Failed, o.Maintain, c.write, c.failed, c.maintain)
			}
			if c.rec.Priority != 11 {
				t.Errorf("priority %v, want the policy's 11", c.rec.Priority)
			}
			if (c.f.Err == nil) != o.Polled {
				t.Errorf("poll %v for err %v", o.Poll, c.f.Err)
			}
			if c.f.Err == nil && !c.rec.LastSuccessAt.Equal(now) {
				t.Errorf("last success %v, want now", c.rec.LastSuccessAt)
			}
		})
	}
	// Disk full a second time with the same message writes nothing more.
	full := fetch.Errorf(fetch.KindDiskFull, "x")
	rec := ok
	rec.LastError = full.Error()
	if o := fetchOutcome(&cfg, priority.DefaultPrior(), &fetchFacts{Now: now, WasCloned: true, Err: full}, &rec); o.Write {
		t.Error("disk full again wrote the record")
	}
}

func TestFetchOutcomeStretchesOnlyASuccessfulPoll(t *testing.T) {
	cfg := Config{MinInterval: time.Minute, Checkpoint: time.Hour, FailAfter: 3, BackoffBase: time.Minute, BackoffMax: time.Hour,
		FailCooldown: time.Hour, BusyRetry: time.Second, Policy: fixedPolicy{}}
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	ok := store.Repo{ID: "r", State: store.RepoOK, LastSuccessAt: now.Add(-time.Hour)}
	// A hooked repo's step (old+1 by the policy) becomes HookStretch steps.
	rec := ok
	fetchOutcome(&cfg, priority.DefaultPrior(), &fetchFacts{Now: now, OldPrio: 10, WasCloned: true, Stretch: HookStretch}, &rec)
	if rec.Priority != 10+HookStretch {
		t.Errorf("stretched priority %v, want %v", rec.Priority, 10+HookStretch)
	}
	// The report carries the stretch, for a status that cannot ask the worker.
	if got := reportOf(&rec).PollStretch; got != HookStretch {
		t.Errorf("report's poll stretch %v, want %v", got, HookStretch)
	}
	// A failure keeps its own back-off priority, unstretched.
	fetchOutcome(&cfg, priority.DefaultPrior(), &fetchFacts{Now: now, OldPrio: 10, WasCloned: true, Stretch: HookStretch,
		Err: fetch.Errorf(fetch.KindNetwork, "x")}, &rec)
	if rec.Priority != 11 || reportOf(&rec).PollStretch != 0 {
		t.Errorf("a failed poll's priority %v and stretch %v, want the policy's 11 and none", rec.Priority, reportOf(&rec).PollStretch)
	}
}
