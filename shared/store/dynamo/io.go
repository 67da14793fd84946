package dynamo

import (
	"context"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// Plain reads and batched writes, with consumed capacity reported and unprocessed
// batch work retried with backoff.

// getItem reads one item with a strongly consistent read; nil if absent.
func (s *Store) getItem(ctx context.Context, op string, k item) (item, error) {
	out, err := s.db.GetItem(ctx, &dynamodb.GetItemInput{
		TableName:              aws.String(s.table),
		Key:                    k,
		ConsistentRead:         aws.Bool(true),
		ReturnConsumedCapacity: s.rcc(),
	})
	if err != nil {
		return nil, fmt.Errorf("dynamo: %s: get %s: %w", op, keyString(k), err)
	}
	s.consumedPtr(op+"/GetItem", out.ConsumedCapacity)
	if len(out.Item) == 0 {
		return nil, nil
	}
	return out.Item, nil
}

// batchGet reads keys (any number, duplicates allowed) with strongly consistent reads
// and returns the items found by keyString.
func (s *Store) batchGet(ctx context.Context, op string, keys []item) (map[string]item, error) {
	found := map[string]item{}
	seen := map[string]bool{}
	var uniq []item
	for _, k := range keys {
		if ks := keyString(k); !seen[ks] {
			seen[ks] = true
			uniq = append(uniq, k)
		}
	}
	for len(uniq) > 0 {
		n := min(len(uniq), 100) // BatchGetItem takes at most 100 keys
		pending := map[string]types.KeysAndAttributes{
			s.table: {Keys: uniq[:n], ConsistentRead: aws.Bool(true)},
		}
		uniq = uniq[n:]
		for attempt := 0; len(pending) > 0; attempt++ {
			if attempt > 0 {
				if attempt > maxAttempts {
					return nil, fmt.Errorf("dynamo: %s: BatchGetItem left keys unprocessed after %d attempts", op, maxAttempts)
				}
				if err := backoff(ctx, attempt); err != nil {
					return nil, err
				}
			}
			out, err := s.db.BatchGetItem(ctx, &dynamodb.BatchGetItemInput{
				RequestItems:           pending,
				ReturnConsumedCapacity: s.rcc(),
			})
			if err != nil {
				return nil, fmt.Errorf("dynamo: %s: BatchGetItem: %w", op, err)
			}
			s.consumed(op+"/BatchGetItem", out.ConsumedCapacity...)
			for _, it := range out.Responses[s.table] {
				found[keyString(it)] = it
			}
			pending = out.UnprocessedKeys
			if ka, ok := pending[s.table]; ok && len(ka.Keys) == 0 {
				pending = nil
			}
		}
	}
	return found, nil
}

// queryPage runs one Query page.
func (s *Store) queryPage(ctx context.Context, op string, in *dynamodb.QueryInput) (*dynamodb.QueryOutput, error) {
	in.TableName = aws.String(s.table)
	in.ReturnConsumedCapacity = s.rcc()
	if in.IndexName == nil {
		in.ConsistentRead = aws.Bool(true) // GSIs are always eventually consistent
	}
	out, err := s.db.Query(ctx, in)
	if err != nil {
		return nil, fmt.Errorf("dynamo: %s: Query: %w", op, err)
	}
	s.consumedPtr(op+"/Query", out.ConsumedCapacity)
	return out, nil
}

// queryAll runs a query to its end, handing each page's items to fn.
func (s *Store) queryAll(ctx context.Context, op string, in *dynamodb.QueryInput, fn func(item) error) error {
	for {
		out, err := s.queryPage(ctx, op, in)
		if err != nil {
			return err
		}
		for _, it := range out.Items {
			if err := fn(it); err != nil {
				return err
			}
		}
		if len(out.LastEvaluatedKey) == 0 {
			return nil
		}
		in.ExclusiveStartKey = out.LastEvaluatedKey
	}
}

// keysOnly is a projection of the table keys.
func keysOnly(in *dynamodb.QueryInput) *dynamodb.QueryInput {
	in.ProjectionExpression = aws.String("#pk, #sk")
	if in.ExpressionAttributeNames == nil {
		in.ExpressionAttributeNames = map[string]string{}
	}
	in.ExpressionAttributeNames["#pk"], in.ExpressionAttributeNames["#sk"] = attrPK, attrSK
	return in
}

// batchWrite performs puts and deletes, 25 per BatchWriteItem, retrying unprocessed ones.
// It is not atomic: only for items no reader relies on yet (ring chunks before their
// head) or any more (trimmed outbox entries, superseded chunks).
func (s *Store) batchWrite(ctx context.Context, op string, reqs []types.WriteRequest) error {
	for len(reqs) > 0 {
		n := min(len(reqs), 25)
		pending := map[string][]types.WriteRequest{s.table: reqs[:n]}
		reqs = reqs[n:]
		for attempt := 0; len(pending[s.table]) > 0; attempt++ {
			if attempt > 0 {
				if attempt > maxAttempts {
					return fmt.Errorf("dynamo: %s: BatchWriteItem left writes unprocessed after %d attempts", op, maxAttempts)
				}
				if err := backoff(ctx, attempt); err != nil {
					return err
				}
			}
			out, err := s.db.BatchWriteItem(ctx, &dynamodb.BatchWriteItemInput{
				RequestItems:           pending,
				ReturnConsumedCapacity: s.rcc(),
			})
			if err != nil {
				return fmt.Errorf("dynamo: %s: BatchWriteItem: %w", op, err)
			}
			s.consumed(op+"/BatchWriteItem", out.ConsumedCapacity...)
			pending = out.UnprocessedItems
		}
	}
	return nil
}

func deleteRequests(keys []item) []types.WriteRequest {
	reqs := make([]types.WriteRequest, len(keys))
	for i, k := range keys {
		reqs[i] = types.WriteRequest{DeleteRequest: &types.DeleteRequest{Key: k}}
	}
	return reqs
}

// deleteMatching deletes the items of a keys-only query. Best effort clean-up: a failure
// is logged, since readers never look at these items.
func (s *Store) deleteMatching(ctx context.Context, op string, in *dynamodb.QueryInput, keep func(item) bool) {
	var keys []item
	err := s.queryAll(ctx, op, keysOnly(in), func(it item) error {
		if keep == nil || !keep(it) {
			keys = append(keys, key(getS(it, attrPK), getS(it, attrSK)))
		}
		return nil
	})
	if err == nil {
		err = s.batchWrite(ctx, op, deleteRequests(keys))
	}
	if err != nil {
		s.cfg.Log.Warn("dynamo: clean-up failed; the leftovers are invisible to readers", "op", op, "err", err)
	}
}

// deleteFirst deletes the first most items in's query finds (all when most is 0): a
// bounded clean-up that leaves the rest, invisible to readers, for a later one.
func (s *Store) deleteFirst(ctx context.Context, op string, in *dynamodb.QueryInput, most int) {
	if most <= 0 {
		s.deleteMatching(ctx, op, in, nil)
		return
	}
	var keys []item
	in = keysOnly(in)
	var err error
	for len(keys) < most {
		in.Limit = aws.Int32(int32(min(most-len(keys), defaultLimit)))
		var out *dynamodb.QueryOutput
		if out, err = s.queryPage(ctx, op, in); err != nil {
			break
		}
		for _, it := range out.Items {
			keys = append(keys, key(getS(it, attrPK), getS(it, attrSK)))
		}
		if len(out.LastEvaluatedKey) == 0 {
			break
		}
		in.ExclusiveStartKey = out.LastEvaluatedKey
	}
	if err == nil {
		err = s.batchWrite(ctx, op, deleteRequests(keys))
	}
	if err != nil {
		s.cfg.Log.Warn("dynamo: clean-up failed; the leftovers are invisible to readers", "op", op, "err", err)
	}
}

// beginsWith is a key condition on a partition and a sort key prefix.
func beginsWith(pk, prefix string) *dynamodb.QueryInput {
	var e expr
	cond := e.eq(attrPK, avS(pk)) + " AND begins_with(" + e.n(attrSK) + ", " + e.v(avS(prefix)) + ")"
	return &dynamodb.QueryInput{
		KeyConditionExpression:    aws.String(cond),
		ExpressionAttributeNames:  e.Names(),
		ExpressionAttributeValues: e.Values(),
	}
}

// partition is a key condition on a whole partition.
func partition(pk string) *dynamodb.QueryInput {
	var e expr
	return &dynamodb.QueryInput{
		KeyConditionExpression:    aws.String(e.eq(attrPK, avS(pk))),
		ExpressionAttributeNames:  e.Names(),
		ExpressionAttributeValues: e.Values(),
	}
}

// between is a key condition on a partition and an inclusive sort key range.
func between(pk, lo, hi string) *dynamodb.QueryInput {
	var e expr
	cond := e.eq(attrPK, avS(pk)) + " AND " + e.n(attrSK) + " BETWEEN " + e.v(avS(lo)) + " AND " + e.v(avS(hi))
	return &dynamodb.QueryInput{
		KeyConditionExpression:    aws.String(cond),
		ExpressionAttributeNames:  e.Names(),
		ExpressionAttributeValues: e.Values(),
	}
}
