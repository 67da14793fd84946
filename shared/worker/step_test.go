package worker

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/mirrorfleet/mirrorfleet/shared/fetch"
	"github.com/mirrorfleet/mirrorfleet/shared/membudget"
	"github.com/mirrorfleet/mirrorfleet/shared/priority"
	"github.com/mirrorfleet/mirrorfleet/shared/store"
)

// The step's tests are scripts: one repo's events in order, each with the actions the
// step must return, written as words (words below), and where it matters the state it
// must leave (stateWords). The runner plays the shell's part the step relies on: the
// clock, the queue's front, the host's hook counts.

// A script line: the clock moves by after, then ev happens.
type line struct {
	after time.Duration
	ev    Event
	want  string // the actions, as words
	state string // if set: the state after, as words
}

// Events the scripts use.
var (
	poll      = PollDue{Prio: 100}
	mirror    = Checked{Cloned: true}
	noMirror  = Checked{Cloned: false}
	clone     = Fetched{Res: fetch.Result{Cloned: true, Changed: true}}
	changed   = Fetched{Res: fetch.Result{Changed: true, Commits: []fetch.Commit{{Author: s0.Add(-time.Minute)}}}}
	unchanged = Fetched{}
	busy      = Fetched{Err: fetch.Errorf(fetch.KindBusy, "lock held")}
	broken    = Fetched{Err: fetch.Errorf(fetch.KindNetwork, "connection reset")}
	hook      = Asked{By: AskHook}
	orgHook   = Asked{By: AskOwnerHook}
	userSync  = Asked{By: AskSync}
	feedName  = Asked{By: AskFeed}
)

var s0 = time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)

// front is the queue's front in the scripts' views.
const front = 50.0

func stepConfig() Config {
	return Config{ID: "w1", Fetchers: 10, MinInterval: 5 * time.Minute, Checkpoint: 6 * time.Hour, FailAfter: 3,
		BackoffBase: time.Minute, BackoffMax: time.Hour, FailCooldown: 24 * time.Hour, BusyRetry: 30 * time.Second,
		MaintainPacks: 16, DiskThreshold: 0.85, Policy: fixedPolicy{}}
}

// mirrored is a repo held and queued whose mirror was fetched an hour ago and written.
func mirrored() RepoState {
	at := s0.Add(-time.Hour)
	return RepoState{Phase: Queued, LastWritten: at, Rec: store.Repo{ID: "r", URL: "https://example.org/a/b", State: store.RepoOK,
		LastFetchAt: at, LastSuccessAt: at, OwnerEpoch: 1}}
}

// known is mirrored() with its mirror's refs known (their digest).
func known() RepoState {
	r := mirrored()
	r.Rec.RefsDigest = "d1"
	return r
}

// script runs lines from start under cfg and view v (Now is moved by the lines).
type script struct {
	start RepoState
	cfg   *Config
	view  View
	lines []line
}

func (sc script) run(t *testing.T) RepoState {
	t.Helper()
	cfg := stepConfig()
	if sc.cfg != nil {
		cfg = *sc.cfg
	}
	v := sc.view
	if v.Now.IsZero() {
		v.Now = s0
	}
	v.Worker, v.Front = "w1", front
	if v.Prior == nil {
		v.Prior = priority.DefaultPrior()
	}
	r := sc.start
	for i, l := range sc.lines {
		v.Now = v.Now.Add(l.after)
		prev := r
		a := Step(&cfg, v, &r, l.ev)
		v.HookLoss.Count(a.Found) // as the shell counts the host's hooks
		if got := words(prev, v, a); got != l.want {
			t.Errorf("line %d, %T%+v: actions %q, want %q", i+1, l.ev, l.ev, got, l.want)
		}
		if l.state != "" {
			if got := stateWords(r, v.Now); got != l.state {
				t.Errorf("line %d, %T%+v: state %q, want %q", i+1, l.ev, l.ev, got, l.state)
			}
		}
	}
	return r
}

// words are actions as a script writes them, in a fixed order. A queue place is
// "front", "new", "out", or "step<Δ>" (Δ the priority past the one the fetch was taken
// at, or past 0 for a repo moving in, to 3 digits) or "front" again for the queue's
// front, then "+<d>" if it may not be fetched for d.
func words(prev RepoState, v View, a Actions) string {
	var w []string
	add := func(ok bool, s string) {
		if ok {
			w = append(w, s)
		}
	}
	add(a.Taken, "taken")
	add(a.Fetch, "fetch")
	add(a.Poll, "poll")
	add(a.Known, "known")
	add(a.MaxBytes > 0, fmt.Sprintf("max=%d", a.MaxBytes))
	add(a.Admit != nil, "admit")
	add(a.Sync, "sync")
	add(a.GuardWrite, "guard")
	add(a.Refuse != nil, "refuse")
	add(a.HandBack != "", "handback")
	add(a.EndFetch, "end")
	add(a.PauseHost, "pause")
	add(a.Changed, "changed")
	add(a.Failed, "failed")
	add(a.Warn != nil, "warn")
	add(a.Found != NoHookFind, map[HookFind]string{HookAnnounced: "announced", HookLost: "lost", HookOutside: "outside"}[a.Found])
	add(a.Learn, "learn")
	add(a.Write, "report")
	add(a.Beat, "beat")
	add(a.Maintain, "maintain")
	add(a.Corrupt, "corrupt")
	switch q := a.Queue; q.Op {
	case QueueAt:
		place := fmt.Sprintf("step%.3g", q.Prio-prev.Prio)
		if q.Prio == v.Front {
			place = "front"
		}
		if !q.NotBefore.IsZero() {
			place += "+" + q.NotBefore.Sub(v.Now).String()
		}
		w = append(w, "queue="+place)
	case QueueFront:
		w = append(w, "queue=front")
	case QueueNew:
		w = append(w, "queue=new")
	case QueueOut:
		w = append(w, "queue=out")
	}
	add(a.Forget, "forget")
	return strings.Join(w, " ")
}

// stateWords is a state as a script writes it: its phase, what is pending and what its
// fetch answers (when not a poll), and "hooked" while its own hooks cover it.
func stateWords(r RepoState, now time.Time) string {
	w := []string{[]string{"notheld", "queued", "fetching", "leaving"}[r.Phase]}
	want := []string{"turn", "ask", "hook"}
	if r.Pending != ByTurn {
		w = append(w, "pending="+want[r.Pending])
	}
	if r.Answering != ByTurn {
		w = append(w, "answering="+want[r.Answering])
	}
	if r.Hook.Hooked(now) {
		w = append(w, "hooked")
	}
	return strings.Join(w, " ")
}

func TestStep(t *testing.T) {
	memory := stepConfig()
	memory.Memory = membudget.NewPool(1 << 30)
	for name, sc := range map[string]script{
		// A new repo is cloned blind, then polled: the first clone is no poll the budget
		// counts and samples no interval; a poll that finds nothing writes nothing within
		// the checkpoint and is learned from.
		"clone then polls": {start: RepoState{}, lines: []line{
			{ev: MovedIn{Rec: store.Repo{ID: "r", URL: "https://example.org/a/b", State: store.RepoCloning, OwnerEpoch: 1}}, want: "queue=new", state: "queued"},
			{ev: poll, want: "fetch", state: "fetching"},
			{ev: noMirror, want: "sync"},
			{ev: clone, want: "end changed report queue=step1+5m0s", state: "queued"},
			{ev: Written{At: s0, Landed: true}},
			{after: time.Hour, ev: poll, want: "fetch poll"},
			{ev: mirror, want: "sync"},
			{ev: unchanged, want: "end learn queue=step1+5m0s"},
			{after: time.Hour, ev: poll, want: "fetch poll"},
			{ev: mirror, want: "sync"},
			{ev: changed, want: "end changed learn report queue=step1+5m0s"},
		}},
		// An unchanged poll past the checkpoint writes; a report that did not land is
		// written by the next fetch whatever it finds.
		"checkpoint and a report that did not land": {start: mirrored(), lines: []line{
			{after: 6 * time.Hour, ev: poll, want: "fetch poll"},
			{ev: mirror, want: "sync"},
			{ev: unchanged, want: "end learn report queue=step1+5m0s"},
			{ev: Written{At: s0.Add(6 * time.Hour), Landed: false}},
			{after: time.Minute, ev: poll, want: "fetch poll"},
			{ev: mirror, want: "sync"},
			{ev: unchanged, want: "end learn report queue=step1+5m0s"},
		}},
		// A hook jumps the queue; its fetch is no poll, is not learned from (no poll of
		// the repo was taken here to pre-empt: TestAHookIsScoredAsThePollItPreempted),
		// and tells the host's hooks announced the push. The hooked repo's polls are stretched
		// (HookStretch) and not learned from either.
		"hook": {start: mirrored(), lines: []line{
			{ev: hook, want: "taken queue=front", state: "queued pending=hook hooked"},
			{ev: poll, want: "fetch", state: "fetching answering=hook hooked"},
			{ev: mirror, want: "sync"},
			{ev: changed, want: "end changed announced report queue=step10+5m0s", state: "queued hooked"},
			{after: time.Hour, ev: poll, want: "fetch poll"},
			{ev: mirror, want: "sync"},
			{ev: unchanged, want: "end queue=step10+5m0s"},
		}},
		// Hooks during a poll coalesce into one more fetch right after it, which answers
		// them: it (not the poll that started before them) beats when it writes nothing.
		// The poll is not learned from: the repo counted as hooked when it ended.
		"hooks during a poll": {start: mirrored(), lines: []line{
			{ev: poll, want: "fetch poll"},
			{ev: hook, want: "taken", state: "fetching pending=hook hooked"},
			{ev: hook, want: "taken"},
			{ev: mirror, want: "sync"},
			{ev: unchanged, want: "end queue=front", state: "queued pending=hook hooked"},
			{ev: poll, want: "fetch", state: "fetching answering=hook hooked"},
			{ev: mirror, want: "sync"},
			{ev: unchanged, want: "end beat queue=step10+5m0s", state: "queued hooked"},
		}},
		// c5ff7aa, 731b270: a hooked repo's poll that finds a push its hook missed counts
		// as a lost hook and unhooks the repo. It was polled as covered, so it is not
		// learned from, and its next step is the policy's own; the polls after it are
		// learned from.
		"a poll finds a push its hook missed": {start: mirrored(), lines: []line{
			{ev: hook, want: "taken queue=front"},
			{ev: poll, want: "fetch"},
			{ev: mirror, want: "sync"},
			{ev: unchanged, want: "end beat queue=step10+5m0s", state: "queued hooked"},
			{after: time.Hour, ev: poll, want: "fetch poll"},
			{ev: mirror, want: "sync"},
			{ev: changed, want: "end changed lost report queue=step1+5m0s", state: "queued"},
			{after: time.Hour, ev: poll, want: "fetch poll"},
			{ev: mirror, want: "sync"},
			{ev: unchanged, want: "end learn queue=step1+5m0s"},
		}},
		// A sync, or a feed naming the repo, asks without saying anything of hooks: the
		// fetch is no poll and not learned from, and beats when it writes nothing.
		"sync and feed": {start: mirrored(), lines: []line{
			{ev: userSync, want: "taken queue=front", state: "queued pending=ask"},
			{ev: feedName, want: "taken queue=front"},
			{ev: poll, want: "fetch", state: "fetching answering=ask"},
			{ev: mirror, want: "sync"},
			{ev: unchanged, want: "end beat queue=step1+5m0s", state: "queued"},
		}},
		// A hook after a sync, both before the fetch: the fetch answers the hook.
		"sync then hook coalesce": {start: mirrored(), lines: []line{
			{ev: userSync, want: "taken queue=front"},
			{ev: hook, want: "taken queue=front", state: "queued pending=hook hooked"},
			{ev: poll, want: "fetch", state: "fetching answering=hook hooked"},
		}},
		// The durable sync request that goes with an ask: answered by a fetch that
		// started at or after the ask (80cbd9e: at its very instant too), not by one that
		// started before it; past AskCovers it is honoured again.
		"sync request answered by the ask's fetch": {start: mirrored(), lines: []line{
			{ev: userSync, want: "taken queue=front"},
			{ev: poll, want: "fetch"},
			{ev: mirror, want: "sync"},
			{ev: unchanged, want: "end beat queue=step1+5m0s"},
			{after: time.Minute, ev: SyncRequested{Epoch: 2}, want: "", state: "queued"},
			{ev: SyncRequested{Epoch: 3}, want: "queue=front", state: "queued pending=ask"},
		}},
		"sync request during the fetch the ask follows": {start: mirrored(), lines: []line{
			{ev: poll, want: "fetch poll"},
			{after: time.Second, ev: userSync, want: "taken"},
			{ev: SyncRequested{Epoch: 2}, want: "", state: "fetching pending=ask"},
			{ev: mirror, want: "sync"},
			{ev: unchanged, want: "end learn queue=front"},
			{ev: poll, want: "fetch", state: "fetching answering=ask"},
			{ev: mirror, want: "sync"},
			{ev: unchanged, want: "end beat queue=step1+5m0s", state: "queued"},
		}},
		"sync request long after its ask": {start: mirrored(), lines: []line{
			{ev: userSync, want: "taken queue=front"},
			{ev: poll, want: "fetch"},
			{ev: mirror, want: "sync"},
			{ev: unchanged, want: "end beat queue=step1+5m0s"},
			{after: AskCovers + time.Second, ev: SyncRequested{Epoch: 2}, want: "queue=front"},
		}},
		// Fixed here: a fetch that finds the mirror's lock busy fetched nothing, so what
		// asked for it is still to be answered: it goes first in line once the lock may
		// be free, its retry is no poll, and a hook's push it brings is announced, not
		// counted as a lost hook (which unhooked the repo). A busy poll retries as a poll.
		"busy lock": {start: mirrored(), lines: []line{
			{ev: hook, want: "taken queue=front"},
			{ev: poll, want: "fetch"},
			{ev: mirror, want: "sync"},
			{ev: busy, want: "end queue=front+30s", state: "queued pending=hook hooked"},
			{after: 30 * time.Second, ev: poll, want: "fetch", state: "fetching answering=hook hooked"},
			{ev: mirror, want: "sync"},
			{ev: changed, want: "end changed announced report queue=step10+5m0s", state: "queued hooked"},
			{after: time.Hour, ev: poll, want: "fetch poll"},
			{ev: mirror, want: "sync"},
			{ev: busy, want: "end queue=step1+30s", state: "queued hooked"},
			{after: 30 * time.Second, ev: poll, want: "fetch poll"},
		}},
		// Moves. Out while waiting: gone at once. Out while fetching: no ask is taken,
		// and the fetch's end forgets it (the next owner goes on). In while held: only the
		// epoch.
		"moved out while queued": {start: mirrored(), lines: []line{
			{ev: MovedOut{}, want: "queue=out forget", state: "notheld"},
			{ev: hook, want: ""},
		}},
		"moved out while fetching": {start: mirrored(), lines: []line{
			{ev: hook, want: "taken queue=front"},
			{ev: poll, want: "fetch"},
			{ev: MovedOut{}, want: "queue=out", state: "leaving answering=hook hooked"},
			{ev: hook, want: ""},
			{ev: SyncRequested{Epoch: 5}, want: ""},
			{ev: mirror, want: "sync"},
			{ev: changed, want: "end forget", state: "notheld"},
		}},
		// Fixed here: a repo moved out and back in while its fetch ran was held twice, the
		// fetch in flight and a new entry queued at once, so a second fetch of it could
		// start. Now it is held again as fetching, and that fetch queues it when it ends.
		"moved out and in while fetching": {start: mirrored(), lines: []line{
			{ev: poll, want: "fetch poll"},
			{ev: MovedOut{}, want: "queue=out"},
			{ev: MovedIn{Rec: mirrored().Rec, Prio: 0}, want: "", state: "fetching"},
			{ev: poll, want: ""},
			{ev: mirror, want: "sync"},
			{ev: unchanged, want: "end learn queue=step1+5m0s", state: "queued"},
		}},
		"moved in while held": {start: mirrored(), lines: []line{
			{ev: MovedIn{Rec: store.Repo{ID: "r", OwnerEpoch: 7}, Prio: 0}, want: "", state: "queued"},
		}},
		// Placement of a repo moving in: a mirrored orphan next in line, a repo at a
		// priority past the front at it, one with no mirror spread over a clone step.
		"orphan with a mirror moves in": {start: RepoState{}, lines: []line{
			{ev: MovedIn{Rec: mirrored().Rec, Prio: 0}, want: "queue=front"},
		}},
		"repo at its priority moves in": {start: RepoState{}, lines: []line{
			{ev: MovedIn{Rec: mirrored().Rec, Prio: 70}, want: "queue=step70"},
		}},
		// The disk guard: above the threshold a repo with no mirror is handed back and one
		// with a mirror is not fetched (its record says why, once); below it the fetch
		// may add its share of the room.
		"disk full, no mirror": {start: mirrored(), lines: []line{
			{ev: poll, want: "fetch poll"},
			{ev: Checked{Cloned: false, DiskUsed: 90, DiskTotal: 100}, want: "handback end forget", state: "notheld"},
		}},
		"disk full, mirrored": {start: mirrored(), lines: []line{
			{ev: poll, want: "fetch poll"},
			{ev: Checked{Cloned: true, DiskUsed: 90, DiskTotal: 100}, want: "end warn report queue=step1+5m0s"},
			{ev: poll, want: "fetch poll"},
			{ev: Checked{Cloned: true, DiskUsed: 90, DiskTotal: 100}, want: "end warn queue=step1+5m0s"},
		}},
		"disk with room": {start: mirrored(), lines: []line{
			{ev: poll, want: "fetch poll"},
			{ev: Checked{Cloned: true, DiskUsed: 500, DiskTotal: 1000}, want: "max=35 sync"},
		}},
		// A repo whose mirror's refs the worker knows: its fetch looks at nothing first and
		// the guard waits for the sync to know it writes. A full disk then skips the
		// write as above; a poll that finds the same refs never asks.
		"refs known, disk full": {start: known(), lines: []line{
			{ev: poll, want: "fetch poll known"},
			{ev: Checked{}, want: "sync guard"},
			{ev: Admitting{DiskUsed: 90, DiskTotal: 100}, want: "refuse"},
			{ev: Fetched{Err: fetch.Errorf(fetch.KindDiskFull, "disk full: fetch skipped")}, want: "end warn report queue=step1+5m0s"},
		}},
		"refs known, disk with room": {start: known(), lines: []line{
			{ev: poll, want: "fetch poll known"},
			{ev: Checked{}, want: "sync guard"},
			{ev: Admitting{DiskUsed: 500, DiskTotal: 1000}, want: "max=35"},
		}},
		// Memory admission: the fetch reserves first; a refusal (the worker stopping)
		// fetched nothing and its turn comes again.
		"memory": {start: mirrored(), cfg: &memory, lines: []line{
			{ev: poll, want: "fetch poll"},
			{ev: mirror, want: "admit"},
			{ev: MemoryAdmitted{}, want: "sync"},
			{ev: Fetched{Need: 4 << 20}, want: "end learn queue=step1+5m0s"},
			{ev: poll, want: "fetch poll"},
			{ev: mirror, want: "admit"},
			{ev: MemoryRefused{Err: errors.New("stopping")}, want: "end queue=step1+30s"},
		}},
		// Failures back off; a host that says 429 is paused whole.
		"failures": {start: mirrored(), lines: []line{
			{ev: poll, want: "fetch poll"},
			{ev: mirror, want: "sync"},
			{ev: broken, want: "end failed warn report queue=step1+5m0s"},
			{ev: poll, want: "fetch poll"},
			{ev: mirror, want: "sync"},
			{ev: Fetched{Err: &fetch.Error{Kind: fetch.KindRateLimited, RetryAfter: time.Hour, Err: errors.New("429")}},
				want: "end pause failed warn report queue=step1+1h0m0s"},
		}},
		// A repo a feed covers is polled as a fall-back (FeedStretch), and its polls are
		// not learned from.
		"feed-covered": {start: mirrored(), view: View{FeedCovered: true}, lines: []line{
			{ev: poll, want: "fetch poll"},
			{ev: mirror, want: "sync"},
			{ev: unchanged, want: "end queue=step100+5m0s"},
		}},
		// A quiet repo of an organization whose hooks cover it: stretched until a poll
		// finds a push of it first, which counts as outside the owner's hooks.
		"organization's hooks": {start: mirrored(), view: View{Owner: &OwnerHooks{OwnerAt: s0}}, lines: []line{
			{ev: poll, want: "fetch poll"},
			{ev: mirror, want: "sync"},
			{ev: changed, want: "end changed outside report queue=step1+5m0s"},
			{ev: poll, want: "fetch poll"},
			{ev: mirror, want: "sync"},
			{ev: unchanged, want: "end learn queue=step1+5m0s"},
		}},
		"organization-level hook of the repo": {start: mirrored(), lines: []line{
			{ev: orgHook, want: "taken queue=front", state: "queued pending=hook hooked"},
		}},
	} {
		t.Run(name, func(t *testing.T) { sc.run(t) })
	}
}

// The memory a fetch reserves follows what the repo's last fetch of the same kind came
// to need.
func TestStepReservesWhatTheLastFetchNeeded(t *testing.T) {
	cfg := stepConfig()
	cfg.Memory = membudget.NewPool(1 << 30)
	v := View{Now: s0, Prior: priority.DefaultPrior()}
	r := mirrored()
	r.Rec.SizeBytes = 1 << 20
	Step(&cfg, v, &r, poll)
	a := Step(&cfg, v, &r, mirror)
	if a.Admit == nil || a.Admit.Start != membudget.Start(1<<20, 0) || a.Admit.PerObject != membudget.PerObjectUpdate {
		t.Fatalf("first update's reservation %+v", a.Admit)
	}
	Step(&cfg, v, &r, MemoryAdmitted{})
	Step(&cfg, v, &r, Fetched{Need: 64 << 20})
	Step(&cfg, v, &r, poll)
	a = Step(&cfg, v, &r, mirror)
	if a.Admit == nil || a.Admit.Start != membudget.Start(1<<20, 64<<20) {
		t.Fatalf("next update's reservation %+v, want what the last one needed", a.Admit)
	}
}

// Only a repo's own turn, once it has a mirror, is a poll the budget counts.
func TestBudgeted(t *testing.T) {
	cfg := stepConfig()
	v := View{Now: s0, Prior: priority.DefaultPrior()}
	if (&RepoState{Phase: Queued}).Budgeted() {
		t.Error("a first clone is budgeted")
	}
	if r := mirrored(); !r.Budgeted() {
		t.Error("a poll is not budgeted")
	}
	for _, ask := range []Ask{AskHook, AskOwnerHook, AskSync, AskFeed} {
		r := mirrored()
		Step(&cfg, v, &r, Asked{By: ask})
		if r.Budgeted() {
			t.Errorf("an ask %v is budgeted", ask)
		}
	}
	r := mirrored()
	Step(&cfg, v, &r, SyncRequested{Epoch: 2})
	if r.Budgeted() {
		t.Error("a sync request is budgeted")
	}
}

// The refs digest: a poll that touched no file keeps the size the repo had and the
// digest; a change takes the sync's size and digest; a mirror that is not what its
// digest says (missing, damaged, another repo's) loses it, so the next fetch looks.
func TestStepRefsDigest(t *testing.T) {
	cfg := stepConfig()
	v := View{Now: s0, Worker: "w1", Prior: priority.DefaultPrior(), Front: front}
	fetchWith := func(r *RepoState, e Fetched) {
		t.Helper()
		if a := Step(&cfg, v, r, poll); !a.Fetch || a.Known != (r.Rec.RefsDigest != "") {
			t.Fatalf("poll of %q: %+v", r.Rec.RefsDigest, a)
		}
		Step(&cfg, v, r, Checked{Cloned: true})
		Step(&cfg, v, r, e)
	}
	r := known()
	r.Rec.SizeBytes = 4096
	fetchWith(&r, Fetched{Res: fetch.Result{RefsDigest: "d1"}})
	if r.Rec.SizeBytes != 4096 || r.Rec.RefsDigest != "d1" {
		t.Fatalf("after a no-change poll: size %d, digest %q", r.Rec.SizeBytes, r.Rec.RefsDigest)
	}
	fetchWith(&r, Fetched{Res: fetch.Result{Changed: true, SizeBytes: 8192, RefsDigest: "d2"}})
	if r.Rec.SizeBytes != 8192 || r.Rec.RefsDigest != "d2" || r.Report().RefsDigest != "d2" {
		t.Fatalf("after a change: size %d, digest %q, report's %q", r.Rec.SizeBytes, r.Rec.RefsDigest, r.Report().RefsDigest)
	}
	for _, k := range []fetch.Kind{fetch.KindCorrupt, fetch.KindConflict} {
		r := known()
		fetchWith(&r, Fetched{Err: fetch.Errorf(k, "not the mirror its refs say")})
		if r.Rec.RefsDigest != "" {
			t.Errorf("after a %s failure the digest stays %q", k, r.Rec.RefsDigest)
		}
	}
	r = known()
	fetchWith(&r, Fetched{Err: fetch.Errorf(fetch.KindNetwork, "connection reset")})
	if r.Rec.RefsDigest != "d1" {
		t.Errorf("a network failure forgot the digest")
	}
}

// A hook's fetch of a repo whose polls are scored is scored as the poll it pre-empted:
// one that found a push, over the time from the last fetch to when that poll was due,
// which the queue's front tells (halfway from the last poll's priority to the next an
// hour after it: due an hour later). A hook of a repo already hooked, or whose fetch
// brings nothing, is scored as nothing; nor is a sync, which says nothing of a push.
func TestAHookIsScoredAsThePollItPreempted(t *testing.T) {
	cfg := stepConfig()
	poll := func(r *RepoState, v View, res fetch.Result) Actions {
		Step(&cfg, v, r, PollDue{Prio: v.Front})
		Step(&cfg, v, r, Checked{Cloned: true})
		return Step(&cfg, v, r, Fetched{Res: res})
	}
	v := View{Now: s0, Worker: "w1", Front: 100, Prior: priority.DefaultPrior()}
	found := fetch.Result{Changed: true, Commits: []fetch.Commit{{Author: s0}}}
	for _, c := range []struct {
		name   string
		ask    Ask
		hooked bool
		res    fetch.Result
		learn  bool
	}{
		{"hook", AskHook, false, found, true},
		{"hook of a hooked repo", AskHook, true, found, false},
		{"hook that brings nothing", AskHook, false, fetch.Result{}, false},
		{"sync", AskSync, false, found, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := mirrored()
			if c.hooked {
				r.Hook = HookState{At: s0.Add(-time.Minute)}
			}
			v := v
			if a := poll(&r, v, fetch.Result{}); a.Learn != !c.hooked {
				t.Fatalf("the poll before: learn %v", a.Learn)
			}
			if want := map[bool]float64{false: 101, true: 110}[c.hooked]; r.Rec.Priority != want {
				t.Fatalf("queued at %v, want %v (the policy's step of 1, stretched when hooked)", r.Rec.Priority, want)
			}
			v.Now, v.Front = s0.Add(time.Hour), 100.5
			Step(&cfg, v, &r, Asked{By: c.ask})
			before := r.Rec.Stats.Evidence()
			a := poll(&r, v, c.res)
			if a.Learn != c.learn {
				t.Fatalf("learn %v, want %v", a.Learn, c.learn)
			}
			if !c.learn {
				return
			}
			want := priority.Poll{Prev: s0, Now: s0.Add(2 * time.Hour), Changed: true}
			if p := a.Learning.Poll; !p.Prev.Equal(want.Prev) || !p.Now.Equal(want.Now) || !p.Changed {
				t.Errorf("scored %+v, want a find from %v to %v", p, want.Prev, want.Now)
			}
			if a.Learning.Evidence != before {
				t.Errorf("scored with evidence %+v, want the evidence before the fetch, %+v", a.Learning.Evidence, before)
			}
		})
	}
}
