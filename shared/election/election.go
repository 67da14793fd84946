// Package election makes one coordinator the leader at a time with Raft's persistent
// currentTerm/votedFor kept in one conditionally-written record (seeds 000, 002). The term
// a leader wins is the fencing token every one of its writes carries.
package election

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/mirrorfleet/mirrorfleet/shared/store"
)

// ErrNotLeader means another coordinator holds a live lease or won the race.
var ErrNotLeader = errors.New("not the leader")

// Action is what a campaign decided to do.
type Action int

const (
	Follow   Action = iota // another candidate's lease is live: do nothing
	Renew                  // we lead: extend the lease in the same term
	TakeOver               // vacant or expired: start term+1 and vote for ourselves
)

func (a Action) String() string {
	return [...]string{"follow", "renew", "takeover"}[a]
}

// Decide is the pure campaign rule: given the stored record, who we are and the time,
// what to do and the record to write.
func Decide(cur store.Election, me string, now time.Time, lease time.Duration) (Action, store.Election) {
	next := cur
	next.LastCallTime = now
	next.LeaseUntil = now.Add(lease)
	switch {
	case cur.VotedFor == me && now.Before(cur.LeaseUntil):
		return Renew, next
	case cur.VotedFor != "" && now.Before(cur.LeaseUntil):
		return Follow, cur
	default:
		// A term is never reused, even by the same candidate after its lease lapsed:
		// writes fenced with the old term must stay refused.
		next.Term = cur.Term + 1
		next.VotedFor = me
		return TakeOver, next
	}
}

// Store is the part of the store an Elector needs.
type Store interface {
	GetElection(ctx context.Context) (store.Election, error)
	CASElection(ctx context.Context, expectVersion int64, e store.Election) (store.Election, error)
}

// Elector campaigns for one candidate.
type Elector struct {
	Store Store
	ID    string
	Lease time.Duration
}

// Campaign renews our lease or takes over an expired one and returns the term we lead
// in. ErrNotLeader when another candidate leads or won the conditional write.
func (e Elector) Campaign(ctx context.Context, now time.Time) (int64, Action, error) {
	cur, err := e.Store.GetElection(ctx)
	if err != nil {
		return 0, Follow, fmt.Errorf("read election: %w", err)
	}
	act, next := Decide(cur, e.ID, now, e.Lease)
	if act == Follow {
		return 0, act, fmt.Errorf("%w: %s leads term %d until %s", ErrNotLeader, cur.VotedFor, cur.Term, cur.LeaseUntil.Format(time.RFC3339))
	}
	got, err := e.Store.CASElection(ctx, cur.Version, next)
	if errors.Is(err, store.ErrConflict) {
		return 0, act, fmt.Errorf("%w: lost the race for term %d", ErrNotLeader, next.Term)
	}
	if err != nil {
		return 0, act, fmt.Errorf("write election: %w", err)
	}
	return got.Term, act, nil
}

// StepDown ends our lease early so another candidate need not wait for it, keeping the
// term (a successor takes term+1).
func (e Elector) StepDown(ctx context.Context, now time.Time) error {
	cur, err := e.Store.GetElection(ctx)
	if err != nil {
		return fmt.Errorf("read election: %w", err)
	}
	if cur.VotedFor != e.ID || !now.Before(cur.LeaseUntil) {
		return nil
	}
	cur.LeaseUntil = now
	if _, err := e.Store.CASElection(ctx, cur.Version, cur); err != nil && !errors.Is(err, store.ErrConflict) {
		return fmt.Errorf("step down: %w", err)
	}
	return nil
}
