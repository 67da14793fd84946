package election

import (
	"testing"
	"time"

	"github.com/mirrorfleet/mirrorfleet/shared/store"
)

func TestDecide(t *testing.T) {
	now := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	lease := 90 * time.Second
	cases := []struct {
		name     string
		cur      store.Election
		act      Action
		term     int64
		votedFor string
	}{
		{"vacant record", store.Election{}, TakeOver, 1, "a"},
		{"own live lease", store.Election{Term: 4, VotedFor: "a", LeaseUntil: now.Add(time.Second)}, Renew, 4, "a"},
		{"other live lease", store.Election{Term: 4, VotedFor: "b", LeaseUntil: now.Add(time.Second)}, Follow, 4, "b"},
		{"other expired lease", store.Election{Term: 4, VotedFor: "b", LeaseUntil: now}, TakeOver, 5, "a"},
		{"own expired lease takes a new term", store.Election{Term: 4, VotedFor: "a", LeaseUntil: now.Add(-time.Minute)}, TakeOver, 5, "a"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			act, next := Decide(c.cur, "a", "", now, lease)
			if act != c.act || next.Term != c.term || next.VotedFor != c.votedFor {
				t.Fatalf("Decide = %v term %d votedFor %q; want %v term %d votedFor %q", act, next.Term, next.VotedFor, c.act, c.term, c.votedFor)
			}
			if act != Follow && !next.LeaseUntil.Equal(now.Add(lease)) {
				t.Fatalf("lease until %v, want %v", next.LeaseUntil, now.Add(lease))
			}
			if act == Follow && next != c.cur {
				t.Fatalf("follow must not change the record")
			}
		})
	}
}

// A member of a group takes over from another member of its group at once (a timer
// fired into another Lambda environment), never from a candidate outside it.
func TestDecideInGroup(t *testing.T) {
	now := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	me := Candidate("fn", "env-2")
	cases := []struct {
		name string
		cur  store.Election
		act  Action
		term int64
	}{
		{"another environment's live lease", store.Election{Term: 4, VotedFor: Candidate("fn", "env-1"), LeaseUntil: now.Add(time.Minute)}, TakeOver, 5},
		{"own live lease", store.Election{Term: 4, VotedFor: me, LeaseUntil: now.Add(time.Minute)}, Renew, 4},
		{"another function's live lease", store.Election{Term: 4, VotedFor: Candidate("fn2", "env-1"), LeaseUntil: now.Add(time.Minute)}, Follow, 4},
		{"a prefix is not the group", store.Election{Term: 4, VotedFor: "fn-other/env-1", LeaseUntil: now.Add(time.Minute)}, Follow, 4},
		{"a local coordinator's live lease", store.Election{Term: 4, VotedFor: "local-host", LeaseUntil: now.Add(time.Minute)}, Follow, 4},
	}
	for _, c := range cases {
		act, next := Decide(c.cur, me, "fn", now, time.Minute)
		if act != c.act || next.Term != c.term {
			t.Errorf("%s: Decide = %v term %d, want %v term %d", c.name, act, next.Term, c.act, c.term)
		}
		if act == TakeOver && next.VotedFor != me {
			t.Errorf("%s: voted for %q", c.name, next.VotedFor)
		}
	}
}
