package dynamo

import (
	"context"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/mirrorfleet/mirrorfleet/shared/store"
)

func (s *Store) GetElection(ctx context.Context) (store.Election, error) {
	m, err := s.getItem(ctx, "GetElection", electionKey())
	if err != nil || m == nil {
		return store.Election{}, err
	}
	return decodeElection(m)
}

// CASElection is one conditional UpdateItem on the election item. It sets only the
// election's own attributes: the item also carries the repo counters that fenced Applies
// move (see Apply), which a whole-item put would wipe.
func (s *Store) CASElection(ctx context.Context, expectVersion int64, e store.Election) (store.Election, error) {
	e.Version = expectVersion + 1
	var x expr
	update := "SET " + x.eq(eVersion, avN(e.Version)) + ", " + x.eq(eTerm, avN(e.Term)) + ", " +
		x.eq(eVotedFor, avS(e.VotedFor)) + ", " + x.eq(eLease, avT(e.LeaseUntil)) + ", " + x.eq(eLastCall, avT(e.LastCallTime))
	cond := "attribute_not_exists(" + x.n(eVersion) + ")"
	if expectVersion != 0 {
		cond = x.eq(eVersion, avN(expectVersion))
	}
	in := &dynamodb.UpdateItemInput{
		TableName:                 aws.String(s.table),
		Key:                       electionKey(),
		UpdateExpression:          aws.String(update),
		ConditionExpression:       aws.String(cond),
		ExpressionAttributeNames:  x.Names(),
		ExpressionAttributeValues: x.Values(),
		ReturnConsumedCapacity:    s.rcc(),
	}
	err := s.retryConflicts(ctx, func() error {
		out, err := s.db.UpdateItem(ctx, in)
		if err == nil {
			s.consumedPtr("CASElection/UpdateItem", out.ConsumedCapacity)
		}
		return err
	})
	switch {
	case isConditionFailed(err):
		return store.Election{}, fmt.Errorf("dynamo: election is not at version %d: %w", expectVersion, store.ErrConflict)
	case err != nil:
		return store.Election{}, fmt.Errorf("dynamo: CASElection: %w", err)
	}
	return e, nil
}

// retryConflicts runs a single-item write again, with backoff, while it collides with a
// transaction in progress on the same item (TransactionConflictException, which the SDK
// does not retry by itself).
func (s *Store) retryConflicts(ctx context.Context, write func() error) error {
	for attempt := 0; ; attempt++ {
		err := write()
		if !isTxConflict(err) || attempt >= maxAttempts {
			return err
		}
		if err := backoff(ctx, attempt+1); err != nil {
			return err
		}
	}
}

func (s *Store) GetSweep(ctx context.Context) (store.Sweep, error) {
	m, err := s.getItem(ctx, "GetSweep", sweepKey())
	if err != nil || m == nil {
		return store.Sweep{}, err
	}
	return decodeSweep(m)
}

func (s *Store) GetListSync(ctx context.Context) (store.ListSync, error) {
	m, err := s.getItem(ctx, "GetListSync", listSyncKey())
	if err != nil || m == nil {
		return store.ListSync{}, err
	}
	return decodeListSync(m)
}

// CountRepos sums the per-state counters: those on the election item (moved by fenced
// Applies) and the counter shards (moved by CreateRepo, RequestDelete, ReportFetch and
// HandBack when they change a state). One GetItem and one Query of 16 small items; no
// scan. Every change of a repo's state moves exactly one counter in the same transaction,
// so the sum is exact.
func (s *Store) CountRepos(ctx context.Context) (map[store.RepoState]int, error) {
	counts := map[store.RepoState]int{}
	add := func(m item) error {
		for a, v := range m {
			st, ok := cutCounter(a)
			if !ok {
				continue
			}
			n, ok := v.(*types.AttributeValueMemberN)
			if !ok {
				continue
			}
			var c int
			if _, err := fmt.Sscan(n.Value, &c); err != nil {
				return fmt.Errorf("dynamo: counter %s=%q: %w", a, n.Value, err)
			}
			counts[st] += c
		}
		return nil
	}
	e, err := s.getItem(ctx, "CountRepos", electionKey())
	if err != nil {
		return nil, err
	}
	if err := add(e); err != nil {
		return nil, err
	}
	if err := s.queryAll(ctx, "CountRepos", partition(pkCounts), add); err != nil {
		return nil, err
	}
	for st, n := range counts {
		if n == 0 {
			delete(counts, st)
		}
	}
	return counts, nil
}

func cutCounter(attr string) (store.RepoState, bool) {
	if len(attr) > 2 && attr[:2] == "n_" {
		return store.RepoState(attr[2:]), true
	}
	return "", false
}
