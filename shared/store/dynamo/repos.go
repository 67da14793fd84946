package dynamo

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/mirrorfleet/mirrorfleet/shared/store"
)

// CreateRepo puts the repo if its id is free and counts it, in one transaction.
func (s *Store) CreateRepo(ctx context.Context, r store.Repo) (store.Repo, bool, error) {
	return s.createRepo(ctx, nil, r)
}

// CreateRepoFenced is CreateRepo with a third action in its transaction: a
// ConditionCheck that the election term is still term (as Apply's fence).
func (s *Store) CreateRepoFenced(ctx context.Context, term int64, r store.Repo) (store.Repo, bool, error) {
	return s.createRepo(ctx, &term, r)
}

func (s *Store) createRepo(ctx context.Context, term *int64, r store.Repo) (store.Repo, bool, error) {
	if err := validID("repo", r.ID); err != nil {
		return store.Repo{}, false, err
	}
	if r.State == "" {
		r.State = store.RepoPending
	}
	it, err := repoItem(r, 1)
	if err != nil {
		return store.Repo{}, false, err
	}
	for attempt := 0; ; attempt++ {
		if attempt > 0 {
			if attempt >= maxAttempts {
				return store.Repo{}, false, fmt.Errorf("dynamo: create repo %s: gave up after %d attempts: %w", r.ID, attempt, store.ErrConflict)
			}
			if err := backoff(ctx, attempt); err != nil {
				return store.Repo{}, false, err
			}
		}
		var x expr
		var actions []types.TransactWriteItem
		if term != nil {
			// First: a canceled transaction may report only its first failed condition
			// (minidyn does), and a stale term must read as such even for an existing id.
			actions = append(actions, s.termCheck(*term))
		}
		put := len(actions)
		actions = append(actions,
			types.TransactWriteItem{Put: &types.Put{
				TableName: aws.String(s.table), Item: it,
				ConditionExpression: aws.String(x.notExists()), ExpressionAttributeNames: x.Names(),
				ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
			}},
			s.countAction(r.ID, "", r.State))
		out, err := s.db.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{
			TransactItems: actions, ReturnConsumedCapacity: s.rcc(),
		})
		if err == nil {
			s.consumed("CreateRepo/TransactWriteItems", out.ConsumedCapacity...)
			return r, true, nil
		}
		reasons, ok := cancelReasons(err)
		if !ok {
			return store.Repo{}, false, fmt.Errorf("dynamo: create repo %s: %w", r.ID, err)
		}
		o := classify(reasons)
		switch {
		case o.other != "":
			return store.Repo{}, false, fmt.Errorf("dynamo: create repo %s: %s: %w", r.ID, o.other, err)
		case term != nil && slices.Contains(o.failed, 0):
			return store.Repo{}, false, fmt.Errorf("dynamo: create repo %s with term %d: the election moved on: %w", r.ID, *term, store.ErrFenced)
		case slices.Contains(o.failed, put):
			existing := reasons[put].Item
			if len(existing) == 0 {
				if existing, err = s.getItem(ctx, "CreateRepo", repoKey(r.ID)); err != nil {
					return store.Repo{}, false, err
				}
			}
			if len(existing) == 0 {
				continue // deleted meanwhile: try again
			}
			old, _, err := decodeRepo(existing)
			return old, false, err
		}
	}
}

// countAction moves the per-state counters of one repo's state change on its counter
// shard (from "" = created, to "" = deleted).
func (s *Store) countAction(id string, from, to store.RepoState) types.TransactWriteItem {
	var x expr
	var adds []string
	if from != "" {
		adds = append(adds, x.n(counterAttr(from))+" "+x.v(avN(-1)))
	}
	if to != "" {
		adds = append(adds, x.n(counterAttr(to))+" "+x.v(avN(1)))
	}
	return types.TransactWriteItem{Update: &types.Update{
		TableName: aws.String(s.table), Key: counterKey(shardOf(id, counterShards)),
		UpdateExpression:         aws.String("ADD " + strings.Join(adds, ", ")),
		ExpressionAttributeNames: x.Names(), ExpressionAttributeValues: x.Values(),
	}}
}

func (s *Store) GetRepo(ctx context.Context, id string) (store.Repo, error) {
	m, err := s.getItem(ctx, "GetRepo", repoKey(id))
	if err != nil {
		return store.Repo{}, err
	}
	if m == nil {
		return store.Repo{}, fmt.Errorf("dynamo: repo %s: %w", id, store.ErrNotFound)
	}
	r, _, err := decodeRepo(m)
	return r, err
}

// ---- listings: a keys-only index, then a consistent BatchGetItem ----

// listing is one index query: its key condition, how a cursor maps to the query's start
// key and back, and which fetched repos still match (the index may lag).
type listing struct {
	op, index string
	in        *dynamodb.QueryInput
	start     func(cursor string) (item, error)
	cursor    func(last item) string
	keep      func(store.Repo) bool
}

// byID is a listing of one partition of an index sorted by repo id; the cursor is the
// last id.
func byID(op, index, hashAttr, hashValue string, keep func(store.Repo) bool) listing {
	var x expr
	return listing{op: op, index: index,
		in: &dynamodb.QueryInput{
			KeyConditionExpression:    aws.String(x.eq(hashAttr, avS(hashValue))),
			ExpressionAttributeNames:  x.Names(),
			ExpressionAttributeValues: x.Values(),
		},
		start: func(cursor string) (item, error) {
			k := repoKey(cursor)
			k[hashAttr], k[attrRepoID] = avS(hashValue), avS(cursor)
			return k, nil
		},
		cursor: func(last item) string { return getS(last, attrRepoID) },
		keep:   keep,
	}
}

// ListRepos pages through the by_id index (one partition, keys only: it is written only
// when a repo is created or deleted). Like every index it is eventually consistent: a
// repo created a moment ago may be missing from a listing.
func (s *Store) ListRepos(ctx context.Context, cursor string, limit int) ([]store.Repo, string, error) {
	return s.list(ctx, byID("ListRepos", indexByID, attrAllKey, allValue, nil), cursor, limit)
}

// ListReposByOwner pages through the owner's partition of the by_owner_pos index.
func (s *Store) ListReposByOwner(ctx context.Context, owner string, cursor string, limit int) ([]store.Repo, string, error) {
	return s.listByOwner(ctx, "ListReposByOwner", owner, 0, store.MaxPos, cursor, limit)
}

// ListReposByOwnerRange is one Query of the owner's partition of by_owner_pos with the
// sort key BETWEEN the range's ends.
func (s *Store) ListReposByOwnerRange(ctx context.Context, owner string, from, to uint64, cursor string, limit int) ([]store.Repo, string, error) {
	return s.listByOwner(ctx, "ListReposByOwnerRange", owner, from, to, cursor, limit)
}

func (s *Store) listByOwner(ctx context.Context, op, owner string, from, to uint64, cursor string, limit int) ([]store.Repo, string, error) {
	if owner == "" || from > to {
		return nil, "", nil // unowned repos are not in the index
	}
	var x expr
	cond := x.eq(attrOwnerKey, avS(owner))
	if from > 0 || to < store.MaxPos {
		cond += " AND " + x.n(attrPosKey) + " BETWEEN " + x.v(avS(posKey(from))) + " AND " + x.v(avS(posKey(to)))
	}
	l := listing{op: op, index: indexByOwner,
		in: &dynamodb.QueryInput{
			KeyConditionExpression:    aws.String(cond),
			ExpressionAttributeNames:  x.Names(),
			ExpressionAttributeValues: x.Values(),
		},
		start: func(cursor string) (item, error) {
			pos, id, err := store.ParsePosCursor(cursor)
			if err != nil {
				return nil, fmt.Errorf("dynamo: %s: %w", op, err)
			}
			k := repoKey(id)
			k[attrOwnerKey], k[attrPosKey] = avS(owner), avS(posKey(pos))
			return k, nil
		},
		cursor: func(last item) string {
			return getS(last, attrPosKey) + strings.TrimPrefix(getS(last, attrPK), pkRepoPre)
		},
		keep: func(r store.Repo) bool {
			pos := r.RingPos()
			return r.Owner == owner && from <= pos && pos <= to
		},
	}
	return s.list(ctx, l, cursor, limit)
}

// ListReposNeedingDecision reads one partition of the sparse needs_decision index: only
// repos for which NeedsDecision holds carry its key attribute, "N" or "P" by Need.
func (s *Store) ListReposNeedingDecision(ctx context.Context, need store.Need, cursor string, limit int) ([]store.Repo, string, error) {
	return s.list(ctx, byID("ListReposNeedingDecision", indexNeeds, attrNeedKey, needValue(need),
		func(r store.Repo) bool { return r.NeedsDecision() && r.Need() == need }), cursor, limit)
}

// list reads up to limit repos of a listing after cursor, fetches them with strongly
// consistent reads, and keeps those that still match.
func (s *Store) list(ctx context.Context, l listing, cursor string, limit int) ([]store.Repo, string, error) {
	if limit <= 0 {
		limit = defaultLimit
	}
	in := l.in
	in.IndexName = aws.String(l.index)
	if cursor != "" {
		k, err := l.start(cursor)
		if err != nil {
			return nil, "", err
		}
		in.ExclusiveStartKey = k
	}
	rs := []store.Repo{}
	for {
		in.Limit = aws.Int32(int32(min(limit-len(rs), 1000)))
		out, err := s.queryPage(ctx, l.op, in)
		if err != nil {
			return nil, "", err
		}
		ids := make([]string, 0, len(out.Items))
		for _, it := range out.Items {
			ids = append(ids, strings.TrimPrefix(getS(it, attrPK), pkRepoPre))
		}
		page, err := s.getRepos(ctx, l.op, ids)
		if err != nil {
			return nil, "", err
		}
		for _, r := range page {
			if l.keep == nil || l.keep(r) {
				rs = append(rs, r)
			}
		}
		if len(out.LastEvaluatedKey) == 0 {
			return rs, "", nil
		}
		if len(rs) >= limit {
			return rs, l.cursor(out.LastEvaluatedKey), nil
		}
		in.ExclusiveStartKey = out.LastEvaluatedKey
	}
}

// getRepos reads repos by id with consistent reads, in the order given, skipping those
// gone.
func (s *Store) getRepos(ctx context.Context, op string, ids []string) ([]store.Repo, error) {
	if len(ids) == 0 {
		return nil, nil
	}
	keys := make([]item, len(ids))
	for i, id := range ids {
		keys[i] = repoKey(id)
	}
	got, err := s.batchGet(ctx, op, keys)
	if err != nil {
		return nil, err
	}
	var rs []store.Repo
	for _, k := range keys {
		if m := got[keyString(k)]; m != nil {
			r, _, err := decodeRepo(m)
			if err != nil {
				return nil, err
			}
			rs = append(rs, r)
		}
	}
	return rs, nil
}

// ListStalest reads the first limit keys of each shard of the stalest index (sorted as
// store.CompareStaleness), merges them, and fetches the first limit repos. The index
// holds every repo not being deleted; a repo a moment into deletion, or whose success
// the index has not caught up with, is filtered or re-sorted on the fetched values.
func (s *Store) ListStalest(ctx context.Context, limit int) ([]store.Repo, error) {
	if limit <= 0 {
		limit = defaultLimit
	}
	type cand struct{ sort, id string }
	var cands []cand
	for shard := range staleShards {
		var x expr
		in := &dynamodb.QueryInput{
			IndexName:                 aws.String(indexStalest),
			KeyConditionExpression:    aws.String(x.eq(attrStaleKey, avS("S"+fmt.Sprint(shard)))),
			ExpressionAttributeNames:  x.Names(),
			ExpressionAttributeValues: x.Values(),
		}
		for n := 0; n < limit; {
			in.Limit = aws.Int32(int32(min(limit-n, 1000)))
			out, err := s.queryPage(ctx, "ListStalest", in)
			if err != nil {
				return nil, err
			}
			for _, it := range out.Items {
				cands = append(cands, cand{getS(it, attrStaleSort), strings.TrimPrefix(getS(it, attrPK), pkRepoPre)})
			}
			n += len(out.Items)
			if len(out.LastEvaluatedKey) == 0 {
				break
			}
			in.ExclusiveStartKey = out.LastEvaluatedKey
		}
	}
	slices.SortFunc(cands, func(a, b cand) int { return cmp.Compare(a.sort, b.sort) })
	ids := make([]string, 0, limit)
	for _, c := range cands[:min(limit, len(cands))] {
		ids = append(ids, c.id)
	}
	rs, err := s.getRepos(ctx, "ListStalest", ids)
	if err != nil {
		return nil, err
	}
	rs = slices.DeleteFunc(rs, func(r store.Repo) bool { return r.State == store.RepoDeleting })
	slices.SortFunc(rs, store.CompareStaleness)
	return rs, nil
}

// ---- repo writes outside Apply ----

// RequestSync sets the flag and the needs-decision key in one conditional UpdateItem:
// a repo with a sync requested needs a decision whatever its state.
func (s *Store) RequestSync(ctx context.Context, id string) error {
	var x expr
	// With a sync requested a repo needs an action, whatever its state (Repo.Need).
	update := "SET " + x.eq(rSync, avBool(true)) + ", " + x.eq(attrNeedKey, avS(needAction)) + ", " +
		x.n(rRev) + " = " + x.n(rRev) + " + " + x.v(avN(1))
	err := s.retryConflicts(ctx, func() error {
		out, err := s.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
			TableName: aws.String(s.table), Key: repoKey(id),
			UpdateExpression: aws.String(update), ConditionExpression: aws.String(x.exists()),
			ExpressionAttributeNames: x.Names(), ExpressionAttributeValues: x.Values(),
			ReturnConsumedCapacity: s.rcc(),
		})
		if err == nil {
			s.consumedPtr("RequestSync/UpdateItem", out.ConsumedCapacity)
		}
		return err
	})
	switch {
	case isConditionFailed(err):
		return fmt.Errorf("dynamo: request sync: repo %s: %w", id, store.ErrNotFound)
	case err != nil:
		return fmt.Errorf("dynamo: request sync %s: %w", id, err)
	}
	return nil
}

func (s *Store) RequestDelete(ctx context.Context, id string) error {
	return s.updateRepo(ctx, "RequestDelete", id, false, nil, markDeleting)
}

// RequestDeleteFenced is RequestDelete whose write is always a transaction, with a
// ConditionCheck that the election term is still term.
func (s *Store) RequestDeleteFenced(ctx context.Context, term int64, id string) error {
	return s.updateRepo(ctx, "RequestDeleteFenced", id, false, &term, markDeleting)
}

func markDeleting(r *store.Repo) error {
	r.State = store.RepoDeleting
	return nil
}

// ReportFetch usually changes no state (ok stays ok): then it is one UpdateItem
// conditioned on owner, epoch and the state. A state change (cloning → ok, ok →
// failing, ...) also moves the counters: a read and a two-item transaction.
func (s *Store) ReportFetch(ctx context.Context, id, owner string, epoch int64, rep store.FetchReport) error {
	apply := func(r *store.Repo) error {
		return r.ApplyReport(owner, epoch, rep)
	}
	if owner != "" && rep.State != "" && rep.State != store.RepoDeleting {
		done, err := s.reportFetchFast(ctx, id, owner, epoch, rep)
		if done || err != nil {
			return err
		}
	}
	return s.updateRepo(ctx, "ReportFetch", id, true, nil, apply)
}

// reportFetchFast writes a report that keeps the stored state. done is false when the
// stored state differs (the caller takes the slow path).
func (s *Store) reportFetchFast(ctx context.Context, id, owner string, epoch int64, rep store.FetchReport) (bool, error) {
	if err := finite(rep.Priority); err != nil {
		return true, fmt.Errorf("dynamo: report fetch %s: %w", id, err)
	}
	var x expr
	sets := []string{
		x.eq(rPrio, avF(rep.Priority)),
		x.eq(rFetch, avT(rep.LastFetchAt)), x.eq(rSuccess, avT(rep.LastSuccessAt)),
		x.eq(rChange, avT(rep.LastChangeAt)), x.eq(rCommit, avT(rep.LastCommitAt)),
		x.eq(rCloneFail, avN(int64(rep.CloneFailCnt))), x.eq(rFetchFail, avN(int64(rep.FetchFailCnt))),
		x.eq(rSize, avN(rep.SizeBytes)),
		x.n(rRev) + " = " + x.n(rRev) + " + " + x.v(avN(1)),
	}
	if !rep.LastSuccessAt.IsZero() {
		// State unchanged and not deleting: the repo is in the stalest index; move it
		// there. Never succeeded, it stays where its creation put it (by CreatedAt, which
		// this update does not read).
		sets = append(sets, x.eq(attrStaleSort, avS(staleSort(rep.LastSuccessAt, time.Time{}, id))))
	}
	var removes []string
	if rep.LastError != "" {
		sets = append(sets, x.eq(rErr, avS(rep.LastError)))
	} else {
		removes = append(removes, x.n(rErr))
	}
	if rep.RefsDigest != "" {
		sets = append(sets, x.eq(rRefs, avS(rep.RefsDigest)))
	} else {
		removes = append(removes, x.n(rRefs))
	}
	if b := rep.Stats.Belief.Bytes(); b != nil {
		sets = append(sets, x.eq(rBelief, avB(b)))
	} else {
		removes = append(removes, x.n(rBelief))
	}
	// Like the full write: a zero statistic is absent, so a stale one must go.
	for _, a := range statAttrs(rep.Stats, rep.PollStretch) {
		av, ok, err := statValue(a.v)
		if err != nil {
			return true, fmt.Errorf("dynamo: report fetch %s: %w", id, err)
		}
		if ok {
			sets = append(sets, x.eq(a.name, av))
		} else {
			removes = append(removes, x.n(a.name))
		}
	}
	update := "SET " + strings.Join(sets, ", ")
	if len(removes) > 0 {
		update += " REMOVE " + strings.Join(removes, ", ")
	}
	cond := x.eq(rOwner, avS(owner)) + " AND " + x.eq(rEpoch, avN(epoch)) + " AND " + x.eq(rState, avS(string(rep.State)))
	var out *dynamodb.UpdateItemOutput
	err := s.retryConflicts(ctx, func() error {
		var err error
		out, err = s.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
			TableName: aws.String(s.table), Key: repoKey(id),
			UpdateExpression: aws.String(update), ConditionExpression: aws.String(cond),
			ExpressionAttributeNames: x.Names(), ExpressionAttributeValues: x.Values(),
			ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
			ReturnConsumedCapacity:              s.rcc(),
		})
		return err
	})
	if err == nil {
		s.consumedPtr("ReportFetch/UpdateItem", out.ConsumedCapacity)
		return true, nil
	}
	ccf, ok := errors.AsType[*types.ConditionalCheckFailedException](err)
	if !ok {
		return true, fmt.Errorf("dynamo: report fetch %s: %w", id, err)
	}
	if len(ccf.Item) == 0 {
		return false, nil // gone (or no old image returned): the slow path reads and decides
	}
	old, _, err := decodeRepo(ccf.Item)
	if err != nil {
		return true, err
	}
	if err := old.CheckFence(owner, epoch); err != nil {
		return true, err
	}
	return false, nil // only the state differs
}

func finite(f float64) error {
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return fmt.Errorf("priority %v is not a finite number", f)
	}
	return nil
}

func (s *Store) HandBack(ctx context.Context, id, owner string, epoch int64, reason string) error {
	return s.updateRepo(ctx, "HandBack", id, true, nil, func(r *store.Repo) error {
		if err := r.CheckFence(owner, epoch); err != nil {
			return err
		}
		r.State, r.LastError = store.RepoOverflow, reason
		return nil
	})
}

// updateRepo reads a repo, applies fn and writes the whole item back conditioned on the
// revision read: a PutItem, or — when the state changes or a term fences the write — a
// transaction that also moves the counters and checks the term. A write that raced in
// between sends it round again. A missing repo is ErrNotFound, except under an owner
// fence, where the owner no longer holding it is ErrConflict.
func (s *Store) updateRepo(ctx context.Context, op, id string, fenced bool, term *int64, fn func(*store.Repo) error) error {
	for attempt := 0; ; attempt++ {
		if attempt > 0 {
			if attempt >= maxAttempts {
				return fmt.Errorf("dynamo: %s %s: the repo kept changing: %w", op, id, store.ErrConflict)
			}
			if err := backoff(ctx, attempt); err != nil {
				return err
			}
		}
		m, err := s.getItem(ctx, op, repoKey(id))
		if err != nil {
			return err
		}
		if m == nil {
			if fenced {
				return fmt.Errorf("dynamo: %s: repo %s is gone: %w", op, id, store.ErrConflict)
			}
			return fmt.Errorf("dynamo: %s: repo %s: %w", op, id, store.ErrNotFound)
		}
		old, rev, err := decodeRepo(m)
		if err != nil {
			return err
		}
		nu := old
		if err := fn(&nu); err != nil {
			return err
		}
		it, err := repoItem(nu, rev+1)
		if err != nil {
			return err
		}
		var x expr
		cond := aws.String(x.eq(rRev, avN(rev)))
		if nu.State == old.State && term == nil {
			err = s.retryConflicts(ctx, func() error {
				out, err := s.db.PutItem(ctx, &dynamodb.PutItemInput{
					TableName: aws.String(s.table), Item: it, ConditionExpression: cond,
					ExpressionAttributeNames: x.Names(), ExpressionAttributeValues: x.Values(),
					ReturnConsumedCapacity: s.rcc(),
				})
				if err == nil {
					s.consumedPtr(op+"/PutItem", out.ConsumedCapacity)
				}
				return err
			})
			switch {
			case err == nil:
				return nil
			case isConditionFailed(err) || isTxConflict(err):
				continue
			default:
				return fmt.Errorf("dynamo: %s %s: %w", op, id, err)
			}
		}
		var actions []types.TransactWriteItem
		if term != nil {
			actions = append(actions, s.termCheck(*term)) // first, as in createRepo
		}
		actions = append(actions, types.TransactWriteItem{Put: &types.Put{
			TableName: aws.String(s.table), Item: it, ConditionExpression: cond,
			ExpressionAttributeNames: x.Names(), ExpressionAttributeValues: x.Values(),
		}})
		if nu.State != old.State {
			actions = append(actions, s.countAction(id, old.State, nu.State))
		}
		out, err := s.db.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{
			TransactItems: actions, ReturnConsumedCapacity: s.rcc(),
		})
		if err == nil {
			s.consumed(op+"/TransactWriteItems", out.ConsumedCapacity...)
			return nil
		}
		reasons, ok := cancelReasons(err)
		if !ok {
			return fmt.Errorf("dynamo: %s %s: %w", op, id, err)
		}
		o := classify(reasons)
		switch {
		case o.other != "":
			return fmt.Errorf("dynamo: %s %s: %s: %w", op, id, o.other, err)
		case term != nil && slices.Contains(o.failed, 0):
			return fmt.Errorf("dynamo: %s %s with term %d: the election moved on: %w", op, id, *term, store.ErrFenced)
		}
	}
}
