package dynamo

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
	"strconv"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/mirrorfleet/mirrorfleet/shared/store"
)

// defaultLimit bounds a page when the caller passes limit <= 0 (as the bbolt store).
const defaultLimit = 1000

// newInc returns a fresh registration marker (16 hex digits). Outbox entries are keyed by
// it, so a worker re-registering under an old id never sees the old registration's
// entries, whether or not their clean-up has run.
func newInc() (string, error) {
	var b [8]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", err
	}
	return hex.EncodeToString(b[:]), nil
}

func validID(kind, id string) error {
	if id == "" {
		return fmt.Errorf("dynamo: empty %s id", kind)
	}
	return nil
}

// ClaimSlot reads the taken slots (one Query of the SLOTS partition), then writes the
// worker and the lowest free slot's item in one transaction, each conditioned on not
// existing yet. A slot taken meanwhile sends it round again; an existing id is ErrConflict.
func (s *Store) ClaimSlot(ctx context.Context, w store.Worker, maxSlots int) (store.Worker, error) {
	if err := validID("worker", w.ID); err != nil {
		return store.Worker{}, err
	}
	if w.State == "" {
		w.State = store.WorkerJoining
	}
	inc, err := newInc()
	if err != nil {
		return store.Worker{}, err
	}
	conflicts := 0
	for range 1000 { // each lost slot is a slot someone else won: bounded by the slots
		taken := map[int]bool{}
		err := s.queryAll(ctx, "ClaimSlot", keysOnly(partition(pkSlots)), func(it item) error {
			n, err := strconv.Atoi(getS(it, attrSK))
			if err != nil {
				return fmt.Errorf("dynamo: slot item %q: %w", getS(it, attrSK), err)
			}
			taken[n] = true
			return nil
		})
		if err != nil {
			return store.Worker{}, err
		}
		slot := -1
		for i := range maxSlots {
			if !taken[i] {
				slot = i
				break
			}
		}
		if slot < 0 {
			if existing, err := s.getItem(ctx, "ClaimSlot", workerKey(w.ID)); err != nil {
				return store.Worker{}, err
			} else if existing != nil {
				return store.Worker{}, fmt.Errorf("dynamo: claim slot: worker %s already exists: %w", w.ID, store.ErrConflict)
			}
			return store.Worker{}, fmt.Errorf("dynamo: claim slot for %s: all %d slots taken: %w", w.ID, maxSlots, store.ErrNoSlot)
		}
		w.Slot, w.Beats = slot, 1
		slotItem := slotKey(slot)
		slotItem[wID], slotItem[wInc] = avS(w.ID), avS(inc)
		var wx, sx expr
		out, err := s.db.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{
			TransactItems: []types.TransactWriteItem{
				{Put: &types.Put{TableName: aws.String(s.table), Item: workerItem(w, inc), ConditionExpression: aws.String(wx.notExists()), ExpressionAttributeNames: wx.Names()}},
				{Put: &types.Put{TableName: aws.String(s.table), Item: slotItem, ConditionExpression: aws.String(sx.notExists()), ExpressionAttributeNames: sx.Names()}},
				{Update: s.workersVersionUpdate()},
			},
			ReturnConsumedCapacity: s.rcc(),
		})
		if err == nil {
			s.consumed("ClaimSlot/TransactWriteItems", out.ConsumedCapacity...)
			return w, nil
		}
		reasons, ok := cancelReasons(err)
		if !ok {
			return store.Worker{}, fmt.Errorf("dynamo: claim slot: %w", err)
		}
		o := classify(reasons)
		switch {
		case len(o.failed) > 0 && o.failed[0] == 0:
			return store.Worker{}, fmt.Errorf("dynamo: claim slot: worker %s already exists: %w", w.ID, store.ErrConflict)
		case o.other != "":
			return store.Worker{}, fmt.Errorf("dynamo: claim slot: %s: %w", o.other, err)
		case o.conflict:
			if conflicts++; conflicts > 3*maxAttempts {
				return store.Worker{}, fmt.Errorf("dynamo: claim slot: %d transaction conflicts: %w", conflicts, store.ErrConflict)
			}
			if err := backoff(ctx, min(conflicts, 6)); err != nil {
				return store.Worker{}, err
			}
		}
		// else: the slot went to someone else; look again.
	}
	return store.Worker{}, fmt.Errorf("dynamo: claim slot for %s: gave up: %w", w.ID, store.ErrConflict)
}

// Heartbeat is one UpdateItem returning the new record. AckSeq only moves forward: the
// update is conditioned on the stored ack not being ahead; if it is (a late, reordered
// heartbeat), a second update writes the rest.
func (s *Store) Heartbeat(ctx context.Context, id string, hb store.Heartbeat) (store.Worker, error) {
	update := func(withAck bool) (item, error) {
		var x expr
		set := "SET " + x.eq(wHB, avT(hb.At)) + ", " + x.eq(wDiskUsed, avN(hb.DiskUsed)) + ", " + x.eq(wDiskTotal, avN(hb.DiskTotal)) +
			", " + x.eq(wFetching, avN(int64(hb.Fetching))) + ", " + x.eq(wQueue, avN(int64(hb.QueueLen)))
		add := " ADD " + x.n(wBeats) + " " + x.v(avN(1))
		st := stalenessAttrs(hb.Staleness)
		st[wRate] = avF(finiteRate(hb.FetchRate))
		for _, a := range slices.Sorted(maps.Keys(st)) {
			set += ", " + x.eq(a, st[a])
		}
		// Set even when empty (the version byte alone): the checks describe this beat.
		set += ", " + x.eq(wChecks, avB(encodeChecks(hb.At, hb.Checks)))
		cond := x.exists()
		if withAck {
			ack := x.v(avU(hb.AckSeq))
			set += ", " + x.n(wAck) + " = " + ack
			cond += " AND " + x.n(wAck) + " <= " + ack
		}
		set += add
		var out *dynamodb.UpdateItemOutput
		err := s.retryConflicts(ctx, func() error {
			var err error
			out, err = s.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
				TableName: aws.String(s.table), Key: workerKey(id),
				UpdateExpression: aws.String(set), ConditionExpression: aws.String(cond),
				ExpressionAttributeNames: x.Names(), ExpressionAttributeValues: x.Values(),
				ReturnValues:                        types.ReturnValueAllNew,
				ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
				ReturnConsumedCapacity:              s.rcc(),
			})
			return err
		})
		if err != nil {
			return nil, err
		}
		s.consumedPtr("Heartbeat/UpdateItem", out.ConsumedCapacity)
		return out.Attributes, nil
	}
	m, err := update(true)
	if ccf, ok := errors.AsType[*types.ConditionalCheckFailedException](err); ok && len(ccf.Item) > 0 {
		m, err = update(false) // the stored ack is ahead of this heartbeat's
	}
	switch {
	case isConditionFailed(err):
		return store.Worker{}, fmt.Errorf("dynamo: heartbeat: worker %s: %w", id, store.ErrNotFound)
	case err != nil:
		return store.Worker{}, fmt.Errorf("dynamo: heartbeat %s: %w", id, err)
	}
	w, err := decodeWorker(m)
	return w.Worker, err
}

// Leave marks the worker draining: one conditional UpdateItem.
func (s *Store) Leave(ctx context.Context, id string) error {
	var x expr
	err := s.retryConflicts(ctx, func() error {
		out, err := s.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
			TableName: aws.String(s.table), Key: workerKey(id),
			UpdateExpression:         aws.String("SET " + x.eq(wState, avS(string(store.WorkerDraining)))),
			ConditionExpression:      aws.String(x.exists()),
			ExpressionAttributeNames: x.Names(), ExpressionAttributeValues: x.Values(),
			ReturnConsumedCapacity: s.rcc(),
		})
		if err == nil {
			s.consumedPtr("Leave/UpdateItem", out.ConsumedCapacity)
		}
		return err
	})
	switch {
	case isConditionFailed(err):
		return fmt.Errorf("dynamo: leave: worker %s: %w", id, store.ErrNotFound)
	case err != nil:
		return fmt.Errorf("dynamo: leave %s: %w", id, err)
	}
	s.bumpWorkersVersion(ctx, "Leave")
	return nil
}

func (s *Store) GetWorker(ctx context.Context, id string) (store.Worker, error) {
	w, err := s.getWorker(ctx, "GetWorker", id)
	if err == nil && w == nil {
		err = fmt.Errorf("dynamo: worker %s: %w", id, store.ErrNotFound)
	}
	if err != nil {
		return store.Worker{}, err
	}
	return w.Worker, nil
}

func (s *Store) getWorker(ctx context.Context, op, id string) (*storedWorker, error) {
	m, err := s.getItem(ctx, op, workerKey(id))
	if err != nil || m == nil {
		return nil, err
	}
	w, err := decodeWorker(m)
	if err != nil {
		return nil, err
	}
	return &w, nil
}

// WorkersVersion is a counter item that membership changes move: ClaimSlot in its
// transaction, Leave and the Applies that change a worker's state or remove it right
// after their write (a reader that saw the old count read the old membership, or sees a
// new count once the write is in). Heartbeats do not touch it, so it costs no write on
// the hot path; reading it is one strongly consistent GetItem.
func (s *Store) WorkersVersion(ctx context.Context) (uint64, error) {
	m, err := s.getItem(ctx, "WorkersVersion", workersVersionKey())
	if err != nil || m == nil {
		return 0, err
	}
	d := decoder{what: "workers version", m: m}
	v := d.u64(attrWorkersV)
	return v, d.err
}

// bumpWorkersVersion moves the workers version after a membership change that is not in
// a transaction with it. A failure is logged: the coordinator then sees the change when
// its kept plan runs out (a silence threshold), at most SuspectAfter later.
func (s *Store) bumpWorkersVersion(ctx context.Context, op string) {
	in := s.workersVersionUpdate()
	out, err := s.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName: in.TableName, Key: in.Key, UpdateExpression: in.UpdateExpression,
		ExpressionAttributeNames: in.ExpressionAttributeNames, ExpressionAttributeValues: in.ExpressionAttributeValues,
		ReturnConsumedCapacity: s.rcc(),
	})
	if err != nil {
		s.cfg.Log.Warn("dynamo: workers version not moved", "op", op, "err", err)
		return
	}
	s.consumedPtr(op+"/UpdateItem", out.ConsumedCapacity)
}

// workersVersionUpdate adds one to the workers version.
func (s *Store) workersVersionUpdate() *types.Update {
	var x expr
	return &types.Update{
		TableName: aws.String(s.table), Key: workersVersionKey(),
		UpdateExpression:          aws.String("ADD " + x.n(attrWorkersV) + " " + x.v(avN(1))),
		ExpressionAttributeNames:  x.Names(),
		ExpressionAttributeValues: x.Values(),
	}
}

func (s *Store) ListWorkers(ctx context.Context) ([]store.Worker, error) {
	var ws []store.Worker
	err := s.queryAll(ctx, "ListWorkers", partition(pkWorkers), func(it item) error {
		w, err := decodeWorker(it)
		ws = append(ws, w.Worker)
		return err
	})
	if err != nil {
		return nil, err
	}
	return ws, nil
}

// ReadOutbox reads the worker record (its registration and trim point), then the
// entries after max(after, trim point) of that registration: a GetItem and a Query, both
// strongly consistent. Entries a trim or a delete left behind (their clean-up runs after
// the transaction) are never returned. An unknown worker has an empty outbox.
func (s *Store) ReadOutbox(ctx context.Context, worker string, after uint64, limit int) ([]store.OutboxEntry, error) {
	if limit <= 0 {
		limit = defaultLimit
	}
	w, err := s.getWorker(ctx, "ReadOutbox", worker)
	if err != nil || w == nil {
		return nil, err
	}
	from := max(after, w.TrimmedTo)
	if from >= w.OutboxHead {
		return nil, nil // nothing after it; also keeps from+1 from wrapping
	}
	in := between(outboxPK(worker, w.Inc), seqSK(from+1), seqSK(w.OutboxHead))
	var es []store.OutboxEntry
	for len(es) < limit {
		in.Limit = aws.Int32(int32(min(limit-len(es), defaultLimit)))
		out, err := s.queryPage(ctx, "ReadOutbox", in)
		if err != nil {
			return nil, err
		}
		for _, it := range out.Items {
			e, err := decodeEntry(it)
			if err != nil {
				return nil, err
			}
			es = append(es, e)
		}
		if len(out.LastEvaluatedKey) == 0 {
			break
		}
		in.ExclusiveStartKey = out.LastEvaluatedKey
	}
	return es, nil
}

// finiteRate is a fetch rate fit to store: a NaN, infinite or negative one is 0.
func finiteRate(r float64) float64 {
	if math.IsNaN(r) || math.IsInf(r, 0) || r < 0 {
		return 0
	}
	return r
}
