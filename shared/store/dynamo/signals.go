package dynamo

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/mirrorfleet/mirrorfleet/shared/store"
)

// A worker's signal item (ADR 21): SIGNAL / <worker id>, string sets of repo ids (hook,
// owner_hook, sync) and expire_at. Each AddSignals moves expire_at to signalTTL ahead,
// so the item of a worker that is gone is removed by TTL and nothing else cleans up.
const (
	pkSignals                      = "SIGNAL"
	sigHook, sigOwnerHook, sigSync = "hook", "owner_hook", "sync"
	signalTTL                      = 24 * time.Hour
)

func signalKey(worker string) item { return key(pkSignals, worker) }

func checkSignals(op, worker string, sig store.Signals) error {
	if err := validID("worker", worker); err != nil {
		return err
	}
	if n := sig.Len(); n > store.MaxSignalIDs {
		return fmt.Errorf("dynamo: %s: %d ids, more than %d", op, n, store.MaxSignalIDs)
	}
	return nil
}

// setValue is ids as a string set (no duplicates, which DynamoDB refuses).
func setValue(ids []string) types.AttributeValue {
	s := slices.Clone(ids)
	slices.Sort(s)
	return &types.AttributeValueMemberSS{Value: slices.Compact(s)}
}

// AddSignals is one UpdateItem, ADD to the sets and SET expire_at, with no condition:
// a signal is a hint, and the durable RequestSync goes with it.
func (s *Store) AddSignals(ctx context.Context, worker string, sig store.Signals) error {
	if err := checkSignals("add signals", worker, sig); err != nil || sig.Empty() {
		return err
	}
	var x expr
	update := "ADD " + strings.Join(signalSets(&x, sig), ", ") + " SET " + x.eq(attrTTL, avN(s.cfg.Now().Add(signalTTL).Unix()))
	out, err := s.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName: aws.String(s.table), Key: signalKey(worker),
		UpdateExpression:         aws.String(update),
		ExpressionAttributeNames: x.Names(), ExpressionAttributeValues: x.Values(),
		ReturnConsumedCapacity: s.rcc(),
	})
	if err != nil {
		return fmt.Errorf("dynamo: add signals for %s: %w", worker, err)
	}
	s.consumedPtr("AddSignals/UpdateItem", out.ConsumedCapacity)
	return nil
}

// GetSignals is one strongly consistent GetItem: a worker with nothing pending pays one
// read unit.
func (s *Store) GetSignals(ctx context.Context, worker string) (store.Signals, error) {
	if err := validID("worker", worker); err != nil {
		return store.Signals{}, err
	}
	it, err := s.getItem(ctx, "GetSignals", signalKey(worker))
	if err != nil || it == nil {
		return store.Signals{}, err
	}
	return store.Signals{Hook: getSS(it, sigHook), OwnerHook: getSS(it, sigOwnerHook), Sync: getSS(it, sigSync)}, nil
}

// RemoveSignals is one UpdateItem DELETE of the ids from the sets (an id added again
// meanwhile goes too: the caller rings what it took after this, so the fetch it causes
// starts after that push). DynamoDB drops a set left empty; the item stays until TTL.
func (s *Store) RemoveSignals(ctx context.Context, worker string, sig store.Signals) error {
	if err := checkSignals("remove signals", worker, sig); err != nil || sig.Empty() {
		return err
	}
	var x expr
	dels := signalSets(&x, sig)
	// The condition keeps a DELETE from creating an item the TTL already removed.
	out, err := s.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName: aws.String(s.table), Key: signalKey(worker),
		UpdateExpression:         aws.String("DELETE " + strings.Join(dels, ", ")),
		ConditionExpression:      aws.String(x.exists()),
		ExpressionAttributeNames: x.Names(), ExpressionAttributeValues: x.Values(),
		ReturnConsumedCapacity: s.rcc(),
	})
	if isConditionFailed(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("dynamo: remove signals of %s: %w", worker, err)
	}
	s.consumedPtr("RemoveSignals/UpdateItem", out.ConsumedCapacity)
	return nil
}

// signalSets are the "name :value" clauses of an ADD or DELETE of sig's non-empty sets.
func signalSets(x *expr, sig store.Signals) []string {
	var out []string
	for _, set := range []struct {
		name string
		ids  []string
	}{{sigHook, sig.Hook}, {sigOwnerHook, sig.OwnerHook}, {sigSync, sig.Sync}} {
		if len(set.ids) > 0 {
			out = append(out, x.n(set.name)+" "+x.v(setValue(set.ids)))
		}
	}
	return out
}

func getSS(m item, a string) []string {
	if v, ok := m[a].(*types.AttributeValueMemberSS); ok {
		out := slices.Clone(v.Value)
		slices.Sort(out)
		return out
	}
	return nil
}
