package worker

import (
	"log/slog"
	"testing"
	"time"

	"github.com/mirrorfleet/mirrorfleet/shared/clock"
	"github.com/mirrorfleet/mirrorfleet/shared/store"
)

func TestOwnerOf(t *testing.T) {
	for _, c := range []struct {
		url, want string
		ok        bool
	}{
		{"https://github.com/org/app", "github.com/org", true},
		{"https://GitHub.com/org/other.git", "github.com/org", true}, // the identity's spelling
		{"https://gitlab.com/group/sub/proj", "gitlab.com/group/sub", true},
		{"https://example.com:8443/a/b", "example.com:8443/a", true},
		{"http://example.com/a/b", "http+example.com/a", true}, // not the https owner
		{"https://example.com/repo", "", false},                // no namespace: not an organization
		{"not a url", "", false},
	} {
		got, ok := OwnerOf(c.url)
		if got != c.want || ok != c.ok {
			t.Errorf("OwnerOf(%q) = %q, %v; want %q, %v", c.url, got, ok, c.want, c.ok)
		}
	}
}

func TestOwnerCovered(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	type hook struct {
		repo  string
		owner bool
		at    time.Duration // after t0
	}
	for _, c := range []struct {
		name  string
		hooks []hook
		at    time.Duration
		want  bool
	}{
		{"nothing", nil, 0, false},
		{"one repo's hooks", []hook{{"a", false, 0}, {"a", false, time.Hour}}, time.Hour, false},
		{"an owner-level hook", []hook{{"a", true, 0}}, 0, true},
		{"owner-level, at the memory's edge", []hook{{"a", true, 0}}, HookMemory, true},
		{"owner-level, forgotten", []hook{{"a", true, 0}}, HookMemory + time.Hour, false},
		{"two repos", []hook{{"a", false, 0}, {"b", false, time.Hour}}, time.Hour, true},
		{"two repos, the first forgotten", []hook{{"a", false, 0}, {"b", false, time.Hour}}, HookMemory + 30*time.Minute, false},
		{"two repos, the first hooked again", []hook{{"a", false, 0}, {"b", false, time.Hour}, {"a", false, 2 * time.Hour}}, HookMemory + 30*time.Minute, true},
		{"one repo again and again after another", []hook{{"b", false, 0}, {"a", false, time.Hour}, {"a", false, HookMemory}}, HookMemory + 30*time.Minute, false},
	} {
		var o OwnerHooks
		for _, h := range c.hooks {
			o.Saw(h.repo, h.owner, t0.Add(h.at))
		}
		if got := o.Covered(t0.Add(c.at)); got != c.want {
			t.Errorf("%s: covered %v, want %v (%+v)", c.name, got, c.want, o)
		}
	}
	var none *OwnerHooks
	if none.Covered(t0) {
		t.Fatal("a nil owner covers")
	}
	o := OwnerHooks{}
	o.Saw("a", false, t0)
	if o.Expired(t0.Add(HookMemory)) || !o.Expired(t0.Add(HookMemory+time.Second)) {
		t.Fatal("an owner is forgotten HookMemory after its latest hook")
	}
}

// A repo of a covered owner with no hook of its own is hooked through its owner until a
// poll finds a push: then it is outside the owner's hook, which does not count as a
// lost hook of the host.
func TestHookedByOwner(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	covered := &OwnerHooks{OwnerAt: now}
	for _, c := range []struct {
		name  string
		h     HookState
		owner *OwnerHooks
		want  Hooking
	}{
		{"no hooks", HookState{}, nil, MaybeUnknown},
		{"owner not covered", HookState{}, &OwnerHooks{Last: [OwnerRepos]RepoHook{{"x", now}}}, MaybeSibling},
		{"owner found unhooked", HookState{}, &OwnerHooks{FoundAt: now}, NotHooked},
		{"owner found unhooked long ago", HookState{}, &OwnerHooks{FoundAt: now.Add(-HookMemory - time.Hour)}, MaybeUnknown},
		{"quiet repo, covered owner", HookState{}, covered, HookedOwner},
		{"own hook", HookState{At: now}, covered, HookedOwn},
		{"own hook lost", HookState{At: now, Lost: true}, covered, MaybeLapsed},
		{"own hook lost twice", HookState{At: now, Lost: true, Gone: true}, covered, NotHooked},
		{"own hook long ago", HookState{At: now.Add(-HookMemory - time.Hour), Lost: true}, covered, HookedOwner},
		{"own hook long ago, owner not covered", HookState{At: now.Add(-HookMemory - time.Hour)}, nil, MaybeLapsed},
		{"outside the owner's hook", HookState{OwnerLost: true}, covered, NotHooked},
	} {
		if got := c.h.HookedBy(c.owner, now); got != c.want {
			t.Errorf("%s: %v, want %v", c.name, got, c.want)
		}
		want := 1.0 // NotHooked, or a level that may be hooked before the host taught anything
		if c.want == HookedOwn || c.want == HookedOwner {
			want = HookStretch
		}
		if got := (&RepoState{Hook: c.h}).Stretch(View{Now: now, Owner: c.owner}); got < want-1e-9 || got > want+1e-9 {
			t.Errorf("%s: stretch %v, want %v", c.name, got, want)
		}
	}
	h := HookState{}
	f := h.Fetched(h.HookedBy(covered, now), false)
	if h.HookedBy(covered, now) != NotHooked || f != HookOutside {
		t.Fatalf("after a poll found a push of a repo hooked by its owner: %+v, found %v", h, f)
	}
	h = HookState{At: now} // its own hook: hooked again, by itself
	if h.HookedBy(covered, now) != HookedOwn {
		t.Fatalf("own hook after: %v", h.HookedBy(covered, now))
	}
}

// The worker learns owners from the hooks it is asked by: an owner-level hook of one
// repo stretches its quiet siblings' polls; a repo-level hook alone does not.
func TestFetchNowLearnsOwners(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	w := New(Config{}, nil, nil, nil, clock.NewVirtual(now), slog.New(slog.DiscardHandler))
	for id, url := range map[string]string{"a": "https://github.com/org/a", "b": "https://github.com/org/b",
		"c": "https://github.com/org/c", "x": "https://github.com/other/x", "top": "https://example.com/top"} {
		w.repos[id] = held(id, url)
	}
	hooked := func(id string) Hooking {
		return w.repos[id].Hook.HookedBy(w.ownerHooksLocked(w.repos[id].Rec.URL), now)
	}
	w.FetchNow("a", AskHook)
	if hooked("a") != HookedOwn || hooked("c") != MaybeSibling {
		t.Fatalf("one repo-level hook: a %v, c %v", hooked("a"), hooked("c"))
	}
	w.FetchNow("b", AskHook) // a second repo of the owner
	if hooked("c") != HookedOwner || hooked("x") != MaybeUnknown {
		t.Fatalf("two repos hooked: c %v, x %v", hooked("c"), hooked("x"))
	}
	w.FetchNow("x", AskOwnerHook)
	w.FetchNow("top", AskOwnerHook) // no namespace: no owner
	if hooked("x") != HookedOwn || len(w.owners) != 2 {
		t.Fatalf("owner-level hook: x %v, owners %v", hooked("x"), w.owners)
	}
	w.FetchNow("c", AskSync) // a sync says nothing of hooks
	if !w.repos["c"].Hook.At.IsZero() {
		t.Fatal("a sync marked a hook")
	}
	w.forgetOwnersLocked(now.Add(HookMemory + time.Second))
	if len(w.owners) != 0 {
		t.Fatalf("owners kept past HookMemory: %v", w.owners)
	}
}

// On AWS an owner-level hook comes through the signal item's OwnerHook set.
func TestSignalsCarryOwnerLevelHooks(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	w := New(Config{}, nil, nil, nil, clock.NewVirtual(now), slog.New(slog.DiscardHandler))
	w.id = "w1"
	w.repos["a"] = held("a", "https://gitea.example.com/org/a")
	w.repos["b"] = held("b", "https://gitea.example.com/org/b")
	st := &memSignals{sig: store.Signals{OwnerHook: []string{"a"}}}
	if asked, _, err := w.TakeSignals(t.Context(), st); err != nil || asked != 1 {
		t.Fatalf("asked %d err %v", asked, err)
	}
	if got := w.repos["b"].Hook.HookedBy(w.ownerHooksLocked(w.repos["b"].Rec.URL), now); got != HookedOwner {
		t.Fatalf("a quiet repo of the owner after an owner-level signal: %v, want HookedOwner", got)
	}
	if len(st.removed.OwnerHook) != 1 {
		t.Fatalf("removed %+v, want what was read", st.removed)
	}
}

// A worker told of a hook of a repo another worker owns covers its own repos of the
// same organization; a sync, or a repo with no organization, tells it nothing.
func TestNoteHookOfAnotherWorkersRepo(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	w := New(Config{}, nil, nil, nil, clock.NewVirtual(now), slog.New(slog.DiscardHandler))
	w.repos["b"] = held("b", "https://github.com/org/b")
	hooked := func() Hooking { return w.repos["b"].Hook.HookedBy(w.ownerHooksLocked(w.repos["b"].Rec.URL), now) }
	w.NoteHook("a", "https://github.com/org/a", AskSync)
	w.NoteHook("top", "https://github.com/top", AskOwnerHook)
	if hooked() != MaybeUnknown || len(w.owners) != 0 {
		t.Fatalf("after a sync and a hook with no organization: %v, owners %v", hooked(), w.owners)
	}
	w.NoteHook("a", "https://github.com/org/a", AskOwnerHook)
	if hooked() != HookedOwner {
		t.Fatalf("after another worker's repo's organization-level hook: %v, want HookedOwner", hooked())
	}
	if _, ok := w.repos["a"]; ok || !w.repos["b"].Hook.At.IsZero() {
		t.Fatal("a noted hook changed the repos the worker holds")
	}
}

// PollStretchOf reads the factor the worker would set on a repo's next poll step: 1
// for a repo nothing covers, HookStretch once its organization's hook is known (shrunk
// by what its host's hooks lost), FeedStretch while a feed lists it.
func TestPollStretchOf(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	fed := "https://github.com/fed/f"
	w := New(Config{FeedCovered: func(url string) bool { return url == fed }}, nil, nil, nil, clock.NewVirtual(now), slog.New(slog.DiscardHandler))
	for id, url := range map[string]string{"b": "https://github.com/org/b", "x": "https://github.com/other/x", "f": fed} {
		w.repos[id] = held(id, url)
	}
	stretch := func(id string) float64 {
		t.Helper()
		s, ok := w.PollStretchOf(id)
		if !ok {
			t.Fatalf("%s: not held", id)
		}
		return s
	}
	if _, ok := w.PollStretchOf("a"); ok {
		t.Fatal("a repo the worker does not hold has a stretch")
	}
	if stretch("b") != 1 || stretch("x") != 1 || stretch("f") != FeedStretch {
		t.Fatalf("before any hook: b %v, x %v, f %v", stretch("b"), stretch("x"), stretch("f"))
	}
	w.NoteHook("a", "https://github.com/org/a", AskOwnerHook)
	if stretch("b") != HookStretch || stretch("x") != 1 {
		t.Fatalf("after org's organization-level hook: b %v (want %v), x %v", stretch("b"), HookStretch, stretch("x"))
	}
	w.hookLoss["github.com"] = &HookLoss{Announced: 100, Lost: 100}
	if want := StretchForLoss(w.hookLoss["github.com"].Share()); stretch("b") != want || want >= HookStretch {
		t.Fatalf("a host that loses hooks: b %v, want %v (< %v)", stretch("b"), want, HookStretch)
	}
}
