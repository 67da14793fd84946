package dynamo

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/mirrorfleet/mirrorfleet/shared/store"
)

// Apply is one TransactWriteItems (docs/adr/0005-dynamodb-fencing.md):
//
//  1. read the election item and every item the mutations touch with one strongly
//     consistent BatchGetItem;
//  2. check the term (ErrFenced), then apply the mutations in order to copies of what was
//     read, checking each one's condition (ErrConflict) exactly as the bbolt store does
//     inside its transaction. Mutations on the same item fold into one action: a
//     DynamoDB transaction takes each item once;
//  3. write: action 0 is the fence — a ConditionCheck term = T on the election item, or,
//     when repo states change, an Update of the same item that moves the per-state
//     counters under the same condition — and every other action is conditioned on its
//     item being as read (repo revision, worker incarnation, heartbeat, outbox head, trim
//     point, ring and list-sync versions);
//  4. if the fence failed: ErrFenced. If another condition failed, an item changed after
//     the read (a heartbeat, a worker's fetch report): read and decide again. If the
//     transaction collided with another one: back off and try again. After maxAttempts,
//     ErrConflict.
//
// Work one transaction cannot hold is done around it: ring chunks are written before
// (invisible until the head points at them), trimmed and deleted outboxes are removed
// after (invisible once the trim point or the worker's incarnation moved).
func (s *Store) Apply(ctx context.Context, term int64, muts []store.Mutation) error {
	if n := store.CountItems(muts); n > store.MaxApplyItems {
		return fmt.Errorf("dynamo: apply touches %d items, max %d: %w", n, store.MaxApplyItems, store.ErrTooLarge)
	}
	keys := []item{electionKey()}
	for _, m := range muts {
		k, err := mutationKey(m)
		if err != nil {
			return err
		}
		keys = append(keys, k)
	}

	rings := map[int]*ringWrite{} // prepared once: the version written does not change between attempts
	maybeCommitted := false       // a transaction succeeded, or failed without saying whether it ran
	defer func() {
		// Chunks no head can point to are dropped at once; after an ambiguous failure
		// they are left to the next ring write's sweep, in case the head did land.
		if !maybeCommitted {
			for _, rw := range rings {
				if rw.written {
					s.dropChunks(cleanupContext(ctx), rw)
				}
			}
		}
	}()

	for attempt := 0; ; attempt++ {
		if attempt > 0 {
			if attempt >= maxAttempts {
				return fmt.Errorf("dynamo: apply: items kept changing under %d attempts: %w", maxAttempts, store.ErrConflict)
			}
			if err := backoff(ctx, attempt); err != nil {
				return err
			}
		}
		got, err := s.batchGet(ctx, "Apply", keys)
		if err != nil {
			return err
		}
		p := &txPlan{s: s, term: term, got: got, rings: rings, deltas: map[store.RepoState]int{}}
		if err := p.build(muts); err != nil {
			return err
		}
		if len(muts) == 0 {
			return nil // the fence held and there is nothing to write
		}
		for _, rw := range p.fresh {
			if !rw.written {
				rw.written = true // even on failure: some may be in, to drop
				if err := s.writeChunks(ctx, rw); err != nil {
					return err
				}
			}
		}
		out, err := s.db.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{
			TransactItems:          p.actions,
			ReturnConsumedCapacity: s.rcc(),
		})
		if err == nil {
			maybeCommitted = true
			s.consumed("Apply/TransactWriteItems", out.ConsumedCapacity...)
			cctx, cancel := context.WithTimeout(cleanupContext(ctx), 30*time.Second)
			for _, fn := range p.after {
				fn(cctx)
			}
			cancel()
			return nil
		}
		reasons, ok := cancelReasons(err)
		if !ok {
			// A time-out or a lost connection may come after the commit: the SDK's own
			// retries reuse the idempotency token, but this outcome is unknown.
			maybeCommitted = true
			return fmt.Errorf("dynamo: apply: %w", err)
		}
		o := classify(reasons)
		switch {
		case slices.Contains(o.failed, 0):
			return fmt.Errorf("dynamo: apply with term %d: the election moved on: %w", term, store.ErrFenced)
		case o.other != "":
			return fmt.Errorf("dynamo: apply: transaction canceled: %s: %w", o.other, err)
		}
		// A mutation's item changed since the read, or another transaction held an item:
		// read again and decide again.
	}
}

// cleanupContext keeps the caller's values but not its cancellation: clean-up after a
// committed transaction should not be cut short by a caller that has its answer.
func cleanupContext(ctx context.Context) context.Context { return context.WithoutCancel(ctx) }

// mutationKey is the main item a mutation touches (DeleteWorker also deletes its slot's
// item, which no other mutation of a valid Apply can touch).
func mutationKey(m store.Mutation) (item, error) {
	switch m := m.(type) {
	case store.PutRing:
		return ringHeadKey(), nil
	case store.PutListSync:
		return listSyncKey(), nil
	case store.PutSweep:
		return sweepKey(), nil
	case store.SetWorkerState:
		return workerKey(m.ID), nil
	case store.DeleteWorker:
		return workerKey(m.ID), nil
	case store.AppendOutbox:
		return workerKey(m.Worker), nil
	case store.TrimOutbox:
		return workerKey(m.Worker), nil
	case store.AssignRepo:
		return repoKey(m.ID), nil
	case store.DeleteRepo:
		return repoKey(m.ID), nil
	default:
		return nil, fmt.Errorf("dynamo: unsupported mutation type %T", m)
	}
}

// txPlan applies mutations to copies of one consistent read, then turns the copies into
// transaction actions.
type txPlan struct {
	s     *Store
	term  int64
	got   map[string]item
	rings map[int]*ringWrite
	fresh []*ringWrite // rings whose chunks must be in the table before the transaction

	workers   map[string]*workerWork
	repos     map[string]*repoWork
	order     []string // item keys in first-touch order, for a stable action order
	ring      *singletonWork
	ringIdx   int // the PutRing whose ring is written
	ringValue store.Ring
	listSync  *singletonWork
	listValue store.ListSync
	sweep     *singletonWork
	sweepVal  store.Sweep

	actions []types.TransactWriteItem
	deltas  map[store.RepoState]int
	after   []func(context.Context)
}

type workerWork struct {
	read    storedWorker
	cur     storedWorker
	deleted bool
	beats   uint64 // a heartbeat count some mutation required (zero: none)
	state   bool   // fields changed
	head    bool
	trimmed bool
	trimMax uint64 // entries the trim deletes at most (0: all)
	entries []store.OutboxEntry
}

type repoWork struct {
	read    store.Repo
	rev     int64
	cur     store.Repo
	deleted bool
}

type singletonWork struct {
	read, cur int64 // versions
}

func (p *txPlan) build(muts []store.Mutation) error {
	e := p.got[keyString(electionKey())]
	stored := int64(0)
	if e != nil {
		el, err := decodeElection(e)
		if err != nil {
			return err
		}
		stored = el.Term
	}
	if e == nil || stored != p.term {
		return fmt.Errorf("dynamo: apply with term %d, stored term %d: %w", p.term, stored, store.ErrFenced)
	}
	p.workers, p.repos = map[string]*workerWork{}, map[string]*repoWork{}
	for i, m := range muts {
		if err := p.mutation(i, m); err != nil {
			return fmt.Errorf("dynamo: apply mutation %d (%T): %w", i, m, err)
		}
	}
	p.actions = append(p.actions, types.TransactWriteItem{}) // the fence, filled in last
	for _, k := range p.order {
		if err := p.emit(k); err != nil {
			return err
		}
	}
	p.actions[0] = p.fence()
	return nil
}

// termCheck is the fence of a coordinator write outside Apply (the list sync's creates
// and deletes): a ConditionCheck that the election item still carries term.
func (s *Store) termCheck(term int64) types.TransactWriteItem {
	var x expr
	return types.TransactWriteItem{ConditionCheck: &types.ConditionCheck{
		TableName: aws.String(s.table), Key: electionKey(), ConditionExpression: aws.String(x.eq(eTerm, avN(term))),
		ExpressionAttributeNames: x.Names(), ExpressionAttributeValues: x.Values(),
	}}
}

// fence is action 0: the election item must still carry the term. Counter deltas of the
// repo states this Apply changes ride on it (an Update costs what a ConditionCheck does).
func (p *txPlan) fence() types.TransactWriteItem {
	var adds []string
	var x expr
	for _, st := range slices.Sorted(maps.Keys(p.deltas)) {
		if d := p.deltas[st]; d != 0 {
			adds = append(adds, x.n(counterAttr(st))+" "+x.v(avN(int64(d))))
		}
	}
	if len(adds) == 0 {
		return p.s.termCheck(p.term)
	}
	cond := x.eq(eTerm, avN(p.term))
	return types.TransactWriteItem{Update: &types.Update{
		TableName: aws.String(p.s.table), Key: electionKey(), ConditionExpression: aws.String(cond),
		UpdateExpression:         aws.String("ADD " + strings.Join(adds, ", ")),
		ExpressionAttributeNames: x.Names(), ExpressionAttributeValues: x.Values(),
	}}
}

func conflictf(format string, args ...any) error {
	return fmt.Errorf(format+": %w", append(args, store.ErrConflict)...)
}

// ---- step 2: mutations on copies ----

func (p *txPlan) touch(k item) {
	ks := keyString(k)
	if !slices.Contains(p.order, ks) {
		p.order = append(p.order, ks)
	}
}

// worker returns the working copy of a worker for a mutation that needs it to exist.
func (p *txPlan) worker(id string) (*workerWork, error) {
	w := p.workers[id]
	if w == nil {
		m := p.got[keyString(workerKey(id))]
		if m == nil {
			return nil, conflictf("worker %s does not exist", id)
		}
		sw, err := decodeWorker(m)
		if err != nil {
			return nil, err
		}
		w = &workerWork{read: sw, cur: sw}
		p.workers[id] = w
		p.touch(workerKey(id))
	}
	if w.deleted {
		return nil, conflictf("worker %s does not exist", id)
	}
	return w, nil
}

// heartbeats checks a mutation's expected heartbeat count against the working copy and
// remembers it as a condition of the write.
func (w *workerWork) heartbeats(expect uint64) error {
	if expect == 0 {
		return nil
	}
	if w.cur.Beats != expect {
		return conflictf("worker %s heartbeat count is %d, want %d", w.cur.ID, w.cur.Beats, expect)
	}
	w.beats = expect
	return nil
}

func (p *txPlan) repo(id string) (*repoWork, error) {
	r := p.repos[id]
	if r == nil {
		m := p.got[keyString(repoKey(id))]
		if m == nil {
			return nil, conflictf("repo %s does not exist", id)
		}
		old, rev, err := decodeRepo(m)
		if err != nil {
			return nil, err
		}
		r = &repoWork{read: old, rev: rev, cur: old}
		p.repos[id] = r
		p.touch(repoKey(id))
	}
	if r.deleted {
		return nil, conflictf("repo %s does not exist", id)
	}
	return r, nil
}

func (p *txPlan) singleton(sw **singletonWork, k item) *singletonWork {
	if *sw == nil {
		v := versionOf(p.got[keyString(k)])
		*sw = &singletonWork{read: v, cur: v}
		p.touch(k)
	}
	return *sw
}

func (p *txPlan) mutation(i int, m store.Mutation) error {
	switch m := m.(type) {
	case store.PutRing:
		r := p.singleton(&p.ring, ringHeadKey())
		if r.cur != m.ExpectVersion {
			return conflictf("ring version is %d, want %d", r.cur, m.ExpectVersion)
		}
		r.cur = m.ExpectVersion + 1
		p.ringIdx, p.ringValue = i, m.Ring
	case store.PutSweep:
		sw := p.singleton(&p.sweep, sweepKey())
		if sw.cur != m.ExpectVersion {
			return conflictf("sweep version is %d, want %d", sw.cur, m.ExpectVersion)
		}
		sw.cur = m.ExpectVersion + 1
		p.sweepVal = m.Sweep
	case store.PutListSync:
		l := p.singleton(&p.listSync, listSyncKey())
		if l.cur != m.ExpectVersion {
			return conflictf("list sync version is %d, want %d", l.cur, m.ExpectVersion)
		}
		l.cur = m.ExpectVersion + 1
		p.listValue = m.ListSync
	case store.SetWorkerState:
		w, err := p.worker(m.ID)
		if err != nil {
			return err
		}
		if err := w.heartbeats(m.ExpectBeats); err != nil {
			return err
		}
		w.cur.State, w.state = m.State, true
		w.cur.SilentSince, w.cur.SilentBeats = m.SilentSince, 0
		if !m.SilentSince.IsZero() {
			w.cur.SilentBeats = m.ExpectBeats
		}
	case store.DeleteWorker:
		w, err := p.worker(m.ID)
		if err != nil {
			return err
		}
		if err := w.heartbeats(m.ExpectBeats); err != nil {
			return err
		}
		w.deleted = true
	case store.AppendOutbox:
		w, err := p.worker(m.Worker)
		if err != nil {
			return err
		}
		if w.cur.OutboxHead != m.ExpectHead {
			return conflictf("worker %s outbox head is %d, want %d", m.Worker, w.cur.OutboxHead, m.ExpectHead)
		}
		for _, e := range m.Entries {
			if err := finite(e.Priority); err != nil {
				return fmt.Errorf("dynamo: outbox entry for %s: %w", e.RepoID, err)
			}
			w.cur.OutboxHead++
			e.Seq = w.cur.OutboxHead
			w.entries = append(w.entries, e)
		}
		w.head = true
	case store.TrimOutbox:
		w, err := p.worker(m.Worker)
		if err != nil {
			return err
		}
		if m.Through > w.cur.TrimmedTo { // never moves back
			w.cur.TrimmedTo, w.trimmed, w.trimMax = m.Through, true, m.Max
		}
	case store.AssignRepo:
		r, err := p.repo(m.ID)
		if err != nil {
			return err
		}
		old := r.cur
		if old.Owner != m.ExpectOwner || old.OwnerEpoch != m.ExpectEpoch {
			return conflictf("repo %s is owner %q epoch %d, want %q epoch %d", m.ID, old.Owner, old.OwnerEpoch, m.ExpectOwner, m.ExpectEpoch)
		}
		if old.State == store.RepoDeleting {
			return conflictf("repo %s is being deleted", m.ID)
		}
		nu := old.Assigned(m)
		r.cur = nu
	case store.DeleteRepo:
		r, err := p.repo(m.ID)
		if err != nil {
			return err
		}
		if r.cur.OwnerEpoch != m.ExpectEpoch {
			return conflictf("repo %s is at epoch %d, want %d", m.ID, r.cur.OwnerEpoch, m.ExpectEpoch)
		}
		r.deleted = true
	default:
		return fmt.Errorf("dynamo: unsupported mutation type %T", m)
	}
	return nil
}

// ---- step 3: one action per item ----

func (p *txPlan) add(a types.TransactWriteItem) { p.actions = append(p.actions, a) }

func (p *txPlan) emit(ks string) error {
	switch {
	case ks == keyString(ringHeadKey()):
		return p.emitRing()
	case ks == keyString(sweepKey()):
		sw := p.sweepVal
		sw.Version = p.sweep.cur
		it, err := sweepItem(sw)
		if err != nil {
			return err
		}
		var x expr
		p.add(types.TransactWriteItem{Put: &types.Put{
			TableName: aws.String(p.s.table), Item: it,
			ConditionExpression:      aws.String(versionCond(&x, p.sweep.read)),
			ExpressionAttributeNames: x.Names(), ExpressionAttributeValues: x.Values(),
		}})
		return nil
	case ks == keyString(listSyncKey()):
		l := p.listValue
		l.Version = p.listSync.cur
		var x expr
		p.add(types.TransactWriteItem{Put: &types.Put{
			TableName: aws.String(p.s.table), Item: listSyncItem(l),
			ConditionExpression:      aws.String(versionCond(&x, p.listSync.read)),
			ExpressionAttributeNames: x.Names(), ExpressionAttributeValues: x.Values(),
		}})
		return nil
	}
	for id, w := range p.workers {
		if ks == keyString(workerKey(id)) {
			return p.emitWorker(w)
		}
	}
	for id, r := range p.repos {
		if ks == keyString(repoKey(id)) {
			return p.emitRepo(r)
		}
	}
	return fmt.Errorf("dynamo: apply: no mutation for item %q", ks)
}

func (p *txPlan) emitRing() error {
	rw := p.rings[p.ringIdx]
	if rw == nil {
		var err error
		if rw, err = prepareRing(p.ringValue); err != nil {
			return err
		}
		p.rings[p.ringIdx] = rw
	}
	version := p.ring.cur
	head, fresh, err := rw.head(p.ringValue, version, p.got[keyString(ringHeadKey())])
	if err != nil {
		return err
	}
	if fresh {
		p.fresh = append(p.fresh, rw)
	}
	var x expr
	p.add(types.TransactWriteItem{Put: &types.Put{
		TableName: aws.String(p.s.table), Item: head,
		ConditionExpression:      aws.String(versionCond(&x, p.ring.read)),
		ExpressionAttributeNames: x.Names(), ExpressionAttributeValues: x.Values(),
	}})
	if getNum(head, hChunks) == "" {
		// Inline: no chunks to cache; those of older chunked rings go.
		p.after = append(p.after, func(ctx context.Context) { p.s.sweepChunks(ctx, version) })
		return nil
	}
	cver, nonce, written := chunkVersion(head), getS(head, hNonce), p.ringValue
	p.after = append(p.after, func(ctx context.Context) {
		p.s.cacheBody(cver, nonce, written)
		p.s.sweepChunks(ctx, cver)
	})
	return nil
}

// emitWorker writes only the fields the coordinator changed (heartbeats write the others
// concurrently), conditioned on the registration, and on the heartbeat count, head and
// trim point the mutations relied on.
func (p *txPlan) emitWorker(w *workerWork) error {
	var x expr
	cond := x.eq(wInc, avS(w.read.Inc))
	if w.beats != 0 {
		cond += " AND " + x.eq(wBeats, avU(w.beats))
	}
	k := workerKey(w.read.ID)
	if w.deleted {
		p.add(types.TransactWriteItem{Delete: &types.Delete{
			TableName: aws.String(p.s.table), Key: k, ConditionExpression: aws.String(cond),
			ExpressionAttributeNames: x.Names(), ExpressionAttributeValues: x.Values(),
		}})
		// The slot is freed if it is still this registration's (or already gone).
		var sx expr
		p.add(types.TransactWriteItem{Delete: &types.Delete{
			TableName: aws.String(p.s.table), Key: slotKey(w.read.Slot),
			ConditionExpression:      aws.String(sx.notExists() + " OR (" + sx.eq(wID, avS(w.read.ID)) + " AND " + sx.eq(wInc, avS(w.read.Inc)) + ")"),
			ExpressionAttributeNames: sx.Names(), ExpressionAttributeValues: sx.Values(),
		}})
		id, inc := w.read.ID, w.read.Inc
		p.after = append(p.after, func(ctx context.Context) {
			p.s.bumpWorkersVersion(ctx, "Apply/DeleteWorker")
			p.s.deleteMatching(ctx, "Apply/DeleteWorker", partition(outboxPK(id, inc)), nil)
		})
		return nil
	}
	var sets []string
	if w.state && store.MembershipChanged(w.read.Worker, w.cur.Worker) {
		p.after = append(p.after, func(ctx context.Context) { p.s.bumpWorkersVersion(ctx, "Apply/SetWorkerState") })
	}
	if w.state {
		// Zero values, not REMOVE, clear a silence: they read back as zero alike.
		sets = append(sets, x.eq(wState, avS(string(w.cur.State))),
			x.eq(wSilentBeats, avU(w.cur.SilentBeats)), x.eq(wSilentSince, avT(w.cur.SilentSince)))
	}
	if w.head {
		cond += " AND " + x.eq(wHead, avU(w.read.OutboxHead))
		sets = append(sets, x.eq(wHead, avU(w.cur.OutboxHead)))
	}
	if w.trimmed {
		cond += " AND " + x.eq(wTrimmed, avU(w.read.TrimmedTo))
		sets = append(sets, x.eq(wTrimmed, avU(w.cur.TrimmedTo)))
		id, inc, through, most := w.read.ID, w.read.Inc, w.cur.TrimmedTo, w.trimMax
		p.after = append(p.after, func(ctx context.Context) {
			p.s.deleteFirst(ctx, "Apply/TrimOutbox", between(outboxPK(id, inc), seqSK(0), seqSK(through)), int(most))
		})
	}
	if len(sets) == 0 { // e.g. a trim that does not move: the worker must still exist
		p.add(types.TransactWriteItem{ConditionCheck: &types.ConditionCheck{
			TableName: aws.String(p.s.table), Key: k, ConditionExpression: aws.String(cond),
			ExpressionAttributeNames: x.Names(), ExpressionAttributeValues: x.Values(),
		}})
	} else {
		p.add(types.TransactWriteItem{Update: &types.Update{
			TableName: aws.String(p.s.table), Key: k, ConditionExpression: aws.String(cond),
			UpdateExpression:         aws.String("SET " + strings.Join(sets, ", ")),
			ExpressionAttributeNames: x.Names(), ExpressionAttributeValues: x.Values(),
		}})
	}
	for _, e := range w.entries {
		if e.Seq <= w.cur.TrimmedTo {
			continue // appended and trimmed in one go
		}
		it, err := p.s.entryItem(w.read.ID, w.read.Inc, e)
		if err != nil {
			return err
		}
		p.add(types.TransactWriteItem{Put: &types.Put{TableName: aws.String(p.s.table), Item: it}})
	}
	return nil
}

// emitRepo replaces (or deletes) the whole repo item, conditioned on its revision; the
// item's index keys follow from the new record.
func (p *txPlan) emitRepo(r *repoWork) error {
	var x expr
	cond := aws.String(x.eq(rRev, avN(r.rev)))
	p.deltas[r.read.State]--
	if r.deleted {
		p.add(types.TransactWriteItem{Delete: &types.Delete{
			TableName: aws.String(p.s.table), Key: repoKey(r.read.ID), ConditionExpression: cond,
			ExpressionAttributeNames: x.Names(), ExpressionAttributeValues: x.Values(),
		}})
		return nil
	}
	p.deltas[r.cur.State]++
	it, err := repoItem(r.cur, r.rev+1)
	if err != nil {
		return err
	}
	p.add(types.TransactWriteItem{Put: &types.Put{
		TableName: aws.String(p.s.table), Item: it, ConditionExpression: cond,
		ExpressionAttributeNames: x.Names(), ExpressionAttributeValues: x.Values(),
	}})
	return nil
}

// versionCond: a versioned singleton is still at expect (0: absent).
func versionCond(x *expr, expect int64) string {
	if expect == 0 {
		return x.notExists()
	}
	return x.eq("version", avN(expect))
}
