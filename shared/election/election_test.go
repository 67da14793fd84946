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
			act, next := Decide(c.cur, "a", now, lease)
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
