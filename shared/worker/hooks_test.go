package worker

import (
	"context"
	"log/slog"
	"math"
	"testing"
	"time"

	"github.com/mirrorfleet/mirrorfleet/shared/clock"
	"github.com/mirrorfleet/mirrorfleet/shared/fetch"
	"github.com/mirrorfleet/mirrorfleet/shared/store"
)

func TestPollStretch(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for _, c := range []struct {
		hook HookState
		want float64
	}{
		{HookState{}, 1},                                     // never sent a hook
		{HookState{At: now}, HookStretch},                    // a hook just now
		{HookState{At: now.Add(-HookMemory)}, HookStretch},   // at the edge of the memory
		{HookState{At: now.Add(-HookMemory - time.Hour)}, 1}, // hooks stopped long ago
		{HookState{At: now, Lost: true}, 1},                  // a poll found a push before its hook
	} {
		if got := (&RepoState{Hook: c.hook}).Stretch(View{Now: now, HookLoss: HookLoss{}}); math.Abs(got-c.want) > 1e-9 {
			t.Errorf("%+v: stretch %v, want %v", c.hook, got, c.want)
		}
		if got := (&RepoState{Hook: c.hook}).Stretch(View{Now: now, FeedCovered: true}); got != FeedStretch {
			t.Errorf("covered by a feed, %+v: stretch %v, want %v", c.hook, got, FeedStretch)
		}
	}
	// A host that loses a quarter of its hooks: its repos are polled at half their rate.
	quarter := HookLoss{Lost: 98, Announced: 102} // Share() = (98+2)/(200+200) = 0.25
	if got := (&RepoState{Hook: HookState{At: now}}).Stretch(View{Now: now, HookLoss: quarter}); math.Abs(got-2) > 1e-9 {
		t.Errorf("a quarter lost: stretch %v, want 2", got)
	}
	// A poll that finds a push first unhooks the repo and counts as lost; a hook's fetch
	// counts as announced.
	h := HookState{At: now}
	if f := h.Fetched(HookedOwn, true); !h.Hooked(now) || f != HookAnnounced {
		t.Fatalf("after a hook's fetch: %+v, found %v", h, f)
	}
	if f := h.Fetched(HookedOwn, false); h.Hooked(now) || f != HookLost {
		t.Fatalf("after a poll found a push first: %+v, found %v", h, f)
	}
}

func TestStretchFollowsTheLoss(t *testing.T) {
	if got := StretchForLoss(AssumedHookLoss); math.Abs(got-HookStretch) > 1e-9 {
		t.Fatalf("assumed loss: stretch %v, HookStretch %v", got, HookStretch)
	}
	for loss, want := range map[float64]float64{0: FeedStretch, 1e-6: FeedStretch, 0.04: 5, 1: 1, 2: 1} {
		if got := StretchForLoss(loss); math.Abs(got-want) > 1e-9 {
			t.Errorf("loss %v: stretch %v, want %v", loss, got, want)
		}
	}
	// Counting: no pushes seen is the assumption; a host's own counts take over.
	var l HookLoss
	if l.Share() != AssumedHookLoss {
		t.Fatalf("nothing seen: loss %v", l.Share())
	}
	for k := range 2000 {
		if k%10 != 0 { // one push in ten found by a poll first
			l.Count(HookAnnounced)
		} else {
			l.Count(HookLost)
		}
	}
	if s := l.Share(); s < 0.08 || s > 0.1 {
		t.Fatalf("a tenth lost over 2000 pushes: estimated %v", s)
	}
	var good HookLoss
	for range 5000 {
		good.Count(HookAnnounced)
	}
	if s := good.Share(); s > 0.001 || StretchForLoss(s) < 30 {
		t.Fatalf("no hook lost in 5000: estimated %v, stretch %v", s, StretchForLoss(s))
	}
}

// memSignals is a signal store holding one worker's signals in memory.
type memSignals struct{ sig, removed store.Signals }

func (m *memSignals) GetSignals(context.Context, string) (store.Signals, error) { return m.sig, nil }
func (m *memSignals) RemoveSignals(_ context.Context, _ string, s store.Signals) error {
	m.removed = s
	return nil
}

// A hook's signal marks the repo as one whose forge sends hooks (its polls stretch); a
// sync's does not.
func TestSignalsKeepHookAndSyncApart(t *testing.T) {
	w := New(Config{}, nil, nil, nil, clock.NewVirtual(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)), slog.New(slog.DiscardHandler))
	w.id = "w1"
	w.repos["h"], w.repos["s"] = &repoEntry{RepoState: RepoState{Phase: Queued}}, &repoEntry{RepoState: RepoState{Phase: Queued}}
	st := &memSignals{sig: store.Signals{Hook: []string{"h"}, Sync: []string{"s"}}}
	if asked, dropped, err := w.TakeSignals(t.Context(), st); err != nil || asked != 2 || dropped != 0 {
		t.Fatalf("asked %d dropped %d err %v", asked, dropped, err)
	}
	if w.repos["h"].Hook.At.IsZero() || !w.repos["s"].Hook.At.IsZero() {
		t.Fatalf("hookAt: hook signal %v, sync signal %v; want only the hook's set", w.repos["h"].Hook.At, w.repos["s"].Hook.At)
	}
	if len(st.removed.Hook) != 1 || len(st.removed.Sync) != 1 {
		t.Fatalf("removed %+v, want what was read", st.removed)
	}
}

// A repo that may be hooked is polled as the host's hooks have done for the repos at
// its level: as if none came until they show otherwise, then stretched by 1/√ of the
// share its next push came without a hook.
func TestMaybeHookedLevelsAreLearned(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	var l HookLoss
	if got := l.Missed(MaybeUnknown); got != 1 {
		t.Fatalf("nothing seen: missed %v, want 1", got)
	}
	for k := range 180 { // of the repos whose owner showed nothing, 60% came with a hook
		l.CountMaybe(MaybeFind{Level: MaybeUnknown, Announced: k%5 < 3})
	}
	l.CountMaybe(MaybeFind{}) // nothing to count
	want := (72 + maybeWeight) / (180 + maybeWeight)
	if got := l.Missed(MaybeUnknown); math.Abs(got-want) > 1e-12 {
		t.Fatalf("missed %v, want %v", got, want)
	}
	if l.Missed(MaybeSibling) != 1 || l.Missed(MaybeLapsed) != 1 || l.Announced+l.Lost+l.Outside != 0 {
		t.Fatalf("a level's counts leaked into another's: %+v", l)
	}
	r := RepoState{}
	if got := r.Stretch(View{Now: now, HookLoss: l}); math.Abs(got-1/math.Sqrt(want)) > 1e-9 {
		t.Fatalf("stretch %v, want %v", got, 1/math.Sqrt(want))
	}
	if !r.scored(View{Now: now, HookLoss: l}) {
		t.Fatal("a repo that may be hooked is not scored: its quiet is its own")
	}
	if got := r.Stretch(View{Now: now, HookLoss: l, Owner: &OwnerHooks{FoundAt: now}}); got != 1 {
		t.Fatalf("a repo whose owner was found unhooked: stretch %v, want 1", got)
	}
}

// What a fetch tells of a repo that may have been hooked: a hook's fetch counts as
// announced at the level the repo was at before the hook, a poll's find as found at its
// level, and moves the repo on: unhooked, and its owner with it when nothing of the
// owner was known.
func TestMaybeHookedFinds(t *testing.T) {
	cfg := stepConfig()
	found := fetch.Result{Changed: true, Commits: []fetch.Commit{{Author: s0}}}
	fetchOf := func(r *RepoState, v View, res fetch.Result) Actions {
		Step(&cfg, v, r, PollDue{Prio: v.Front})
		Step(&cfg, v, r, Checked{Cloned: true})
		return Step(&cfg, v, r, Fetched{Res: res})
	}
	sibling := &OwnerHooks{Last: [OwnerRepos]RepoHook{{"x", s0}}}
	for _, c := range []struct {
		name  string
		hook  HookState
		owner *OwnerHooks
		level Hooking
	}{
		{"owner unknown", HookState{}, nil, MaybeUnknown},
		{"a sibling hooked", HookState{}, sibling, MaybeSibling},
		{"own hook lost once", HookState{At: s0.Add(-time.Hour), Lost: true}, nil, MaybeLapsed},
	} {
		v := View{Now: s0, Worker: "w1", Front: 100, Owner: c.owner}
		r := mirrored()
		r.Hook = c.hook
		if got := r.Hook.HookedBy(c.owner, s0); got != c.level {
			t.Fatalf("%s: level %v, want %v", c.name, got, c.level)
		}
		Step(&cfg, v, &r, Asked{By: AskHook})
		a := fetchOf(&r, v, found)
		if a.Maybe != (MaybeFind{Level: c.level, Announced: true}) || a.OwnerFound || a.Found != HookAnnounced {
			t.Fatalf("%s, a hook's fetch: %+v, owner found %v, found %v", c.name, a.Maybe, a.OwnerFound, a.Found)
		}
		if r.Hook.HookedBy(c.owner, s0) != HookedOwn || r.AskedBy != NotHooked {
			t.Fatalf("%s: after its hook %v (asked by %v), want HookedOwn", c.name, r.Hook.HookedBy(c.owner, s0), r.AskedBy)
		}

		r = mirrored()
		r.Hook = c.hook
		a = fetchOf(&r, v, fetch.Result{}) // a poll that finds nothing tells nothing
		if a.Maybe.Level != NotHooked || r.Hook.HookedBy(c.owner, s0) != c.level {
			t.Fatalf("%s, an empty poll: %+v, level after %v", c.name, a.Maybe, r.Hook.HookedBy(c.owner, s0))
		}
		a = fetchOf(&r, v, found)
		if a.Maybe != (MaybeFind{Level: c.level}) || a.OwnerFound != (c.level == MaybeUnknown) || a.Found != NoHookFind {
			t.Fatalf("%s, a poll's find: %+v, owner found %v, found %v", c.name, a.Maybe, a.OwnerFound, a.Found)
		}
		if got := r.Hook.HookedBy(c.owner, s0); got != NotHooked {
			t.Fatalf("%s: after a poll found a push, %v, want NotHooked", c.name, got)
		}
		Step(&cfg, v, &r, Asked{By: AskHook}) // hooked again by its next hook
		if got := r.Hook.HookedBy(c.owner, s0); got != HookedOwn {
			t.Fatalf("%s: after a hook, %v", c.name, got)
		}
	}
}

// The worker counts each level's finds for the repo's host, and a poll's find of a repo
// whose owner showed nothing marks the owner: its other repos are polled as unhooked.
func TestWorkerLearnsMaybeHookedLevels(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	w := New(Config{Policy: fixedPolicy{}}, nil, nil, nil, clock.NewVirtual(now), slog.New(slog.DiscardHandler))
	for id, url := range map[string]string{"a": "https://github.com/org/a", "b": "https://github.com/org/b",
		"c": "https://github.com/org/c", "top": "https://github.com/top"} {
		r := held(id, url)
		r.Rec.LastSuccessAt, r.Rec.State = now.Add(-time.Hour), store.RepoOK
		w.repos[id] = r
	}
	level := func(id string) Hooking {
		return w.repos[id].Hook.HookedBy(w.ownerHooksLocked(w.repos[id].Rec.URL), now)
	}
	pollFinds := func(id string) {
		t.Helper()
		w.stepLocked(id, now, PollDue{Prio: 1})
		w.stepLocked(id, now, Checked{Cloned: true})
		w.inFlight++ // as the fetch's start counts it
		w.stepLocked(id, now, Fetched{Res: fetch.Result{Changed: true, Commits: []fetch.Commit{{Author: now}}}})
	}
	pollFinds("a")
	if level("a") != NotHooked || level("b") != NotHooked || level("top") != MaybeUnknown {
		t.Fatalf("after a poll found a push of an owner that showed nothing: a %v, b %v, top %v", level("a"), level("b"), level("top"))
	}
	if got := w.hookLoss["github.com"].Maybe[MaybeUnknown]; got != (MaybeCount{Found: 1}) {
		t.Fatalf("counted %+v, want one found", got)
	}
	pollFinds("top") // no owner: only the repo is unhooked
	if level("top") != NotHooked || len(w.owners) != 1 {
		t.Fatalf("a repo with no owner: %v, owners %v", level("top"), w.owners)
	}
	w.FetchNow("b", AskHook) // a hook of the owner's after all: its quiet repos may be hooked
	if level("c") != MaybeSibling {
		t.Fatalf("after a hook of a sibling: c %v, want MaybeSibling", level("c"))
	}
	w.forgetOwnersLocked(now.Add(HookMemory + time.Second))
	if len(w.owners) != 0 {
		t.Fatalf("owners kept past HookMemory: %v", w.owners)
	}
}
