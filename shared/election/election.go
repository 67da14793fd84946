// Package election makes one coordinator the leader at a time with Raft's persistent
// currentTerm/votedFor kept in one conditionally-written record (seeds 000, 002). The term
// a leader wins is the fencing token every one of its writes carries.
package election

import (
	"context"
	"errors"
	"fmt"
	"strings"
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

// Candidate is the id a member of a group campaigns under: the group, a slash, and what
// tells its members apart (on Lambda: the function name and the execution environment).
func Candidate(group, instance string) string { return group + "/" + instance }

// InGroup reports whether candidate id belongs to group ("" is no group).
func InGroup(id, group string) bool { return group != "" && strings.HasPrefix(id, group+"/") }

// Decide is the pure campaign rule: given the stored record, who we are (me, in group)
// and the time, what to do and the record to write.
//
// The members of a group never act at the same time — one Lambda function with reserved
// concurrency 1 — so a member whose group leads takes the next term at once instead of
// waiting for the lease: a timer fired into a new execution environment acts. The new
// term fences the previous member's writes, so this stays safe even if two members did
// run at once (they would only take turns).
func Decide(cur store.Election, me, group string, now time.Time, lease time.Duration) (Action, store.Election) {
	next := cur
	next.LastCallTime = now
	next.LeaseUntil = now.Add(lease)
	switch {
	case cur.VotedFor == me && now.Before(cur.LeaseUntil):
		return Renew, next
	case cur.VotedFor != "" && now.Before(cur.LeaseUntil) && !InGroup(cur.VotedFor, group):
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
	// Group, if set, is the group ID belongs to (ID is Candidate(Group, ...)): see Decide.
	Group string
	Lease time.Duration
}

// Campaign renews our lease or takes over an expired one and returns the term we lead
// in. ErrNotLeader when another candidate leads or won the conditional write.
func (e Elector) Campaign(ctx context.Context, now time.Time) (int64, Action, error) {
	cur, err := e.Store.GetElection(ctx)
	if err != nil {
		return 0, Follow, fmt.Errorf("read election: %w", err)
	}
	act, next := Decide(cur, e.ID, e.Group, now, e.Lease)
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
