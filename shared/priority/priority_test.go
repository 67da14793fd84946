package priority

import (
	"math"
	"testing"
	"time"
)

func TestCbrtFollowsTheSeedFormula(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	step := math.Cbrt(2592000) // ≈ 137.37
	cases := []struct {
		name string
		in   Input
		want float64
	}{
		{"not cloned, no failures", Input{Old: 10, Now: now}, 10 + step},
		{"not cloned, 2 clone failures", Input{Old: 10, CloneFailCnt: 2, Now: now}, 10 + 3*step},
		{"not cloned ignores commits", Input{Old: 1, LastCommitAt: now.Add(-time.Hour), Now: now}, 1 + step},
		{"cloned, empty repo", Input{Old: 5, Cloned: true, Now: now}, 5 + step},
		{"cloned, empty repo, 1 fetch failure", Input{Old: 5, Cloned: true, FetchFailCnt: 1, Now: now}, 5 + 2*step},
		{"commit in the future", Input{Old: 0, Cloned: true, LastCommitAt: now.Add(time.Minute), Now: now}, step},
		{"commit exactly now", Input{Old: 0, Cloned: true, LastCommitAt: now, Now: now}, step},
		{"commit 1000 s ago", Input{Old: 7, Cloned: true, LastCommitAt: now.Add(-1000 * time.Second), Now: now}, 7 + 10},
		{"commit 8 days ago", Input{Old: 7, Cloned: true, LastCommitAt: now.Add(-8 * 24 * time.Hour), Now: now}, 7 + math.Cbrt(8*86400)},
		{"fetch failures do not matter with commits", Input{Old: 0, Cloned: true, FetchFailCnt: 9, LastCommitAt: now.Add(-27 * time.Second), Now: now}, 3},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := Cbrt{}.Next(c.in)
			if math.Abs(got-c.want) > 1e-9 {
				t.Fatalf("Next = %v, want %v", got, c.want)
			}
		})
	}
}

func TestRecentlyChangedReposComeBackSooner(t *testing.T) {
	now := time.Date(2026, 1, 2, 0, 0, 0, 0, time.UTC)
	hot := Cbrt{}.Next(Input{Cloned: true, LastCommitAt: now.Add(-time.Hour), Now: now})
	cold := Cbrt{}.Next(Input{Cloned: true, LastCommitAt: now.Add(-365 * 24 * time.Hour), Now: now})
	if !(hot < cold) {
		t.Fatalf("hot repo step %v should be smaller than cold repo step %v", hot, cold)
	}
}

func TestByName(t *testing.T) {
	for name, want := range map[string]string{"": "bayes", "bayes": "bayes", "rate": "rate", "cbrt": "cbrt"} {
		if p, ok := ByName(name); !ok || p.Name() != want {
			t.Fatalf("ByName(%q) = %v, %v; want %s", name, p, ok, want)
		}
	}
	for _, name := range []string{"nope", "Rate", " cbrt", "Bayes"} {
		if _, ok := ByName(name); ok {
			t.Fatalf("unknown policy %q accepted", name)
		}
	}
	for _, name := range Names() {
		if _, ok := ByName(name); !ok {
			t.Fatalf("Names lists %q, ByName refuses it", name)
		}
	}
}
