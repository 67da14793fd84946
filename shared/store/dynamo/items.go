package dynamo

import (
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"maps"
	"math"
	"strconv"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/mirrorfleet/mirrorfleet/shared/priority"
	"github.com/mirrorfleet/mirrorfleet/shared/store"
)

// Item shapes. Every record is a flat item with short attribute names; times are UTC
// RFC 3339 strings with nanoseconds (fmtTime), numbers are DynamoDB numbers.

// ---- repos ----

const (
	// staleShards spreads the stalest index over partitions: every successful fetch moves
	// a repo in it. Readers query every shard and merge, so changing it needs a re-index.
	staleShards = 4
	// counterShards spreads the per-state counters that worker and API writes move.
	counterShards = 16
)

func shardOf(id string, n int) int {
	h := fnv.New32a()
	h.Write([]byte(id))
	return int(h.Sum32() % uint32(n))
}

func staleKey(id string) string { return "S" + strconv.Itoa(shardOf(id, staleShards)) }

var (
	minStaleTime = time.Unix(0, math.MinInt64)
	maxStaleTime = time.Unix(0, math.MaxInt64)
)

// staleSort orders the stalest index: never-succeeded repos first, by when they were
// added, then by last success, then by id. Times are fixed-width so string order is
// time order.
func staleSort(lastSuccess, created time.Time, id string) string {
	if lastSuccess.IsZero() {
		return "0" + staleTime(created) + "#" + id
	}
	return "1" + staleTime(lastSuccess) + "#" + id
}

func staleTime(t time.Time) string {
	if t.Before(minStaleTime) {
		t = minStaleTime
	} else if t.After(maxStaleTime) {
		t = maxStaleTime
	}
	return fmt.Sprintf("%020d", uint64(t.UnixNano())^(1<<63))
}

// Repo attribute names.
const (
	rID, rURL, rSource, rOwner, rEpoch, rSalt, rState, rPrio, rSync = "id", "url", "src", "owner", "epoch", "salt", "state", "prio", "sync"
	rCreated, rFetch, rSuccess, rChange, rCommit                    = "created", "last_fetch", "last_success", "last_change", "last_commit"
	rCloneFail, rFetchFail, rSize, rErr, rRev                       = "clone_fail", "fetch_fail", "size", "last_error", "rev"
	rPolls, rChanges, rPolled                                       = "st_n", "st_x", "st_t" // priority.Stats; absent when zero
	rEvents, rExposure, rWinEvents, rWinSeconds, rWinQuiet          = "st_e", "st_s", "st_we", "st_ws", "st_wq"
	rRoot, rYoung                                                   = "st_r", "st_y" // 1 when the first clone reached the root; and it was young
	rMade                                                           = "st_m"         // 1 when the making of the root it reached held several pushes
	rBelief                                                         = "st_b"         // priority.Stats.Belief, as Belief.Bytes; absent when unset
	rStretch                                                        = "stretch"      // store.Repo.PollStretch; absent when zero
	rUpstream                                                       = "up"           // store.Repo.Upstream; absent when empty
	rRefs                                                           = "refs"         // store.Repo.RefsDigest; absent when empty
)

// statAttr is one stored statistic of a repo's polls.
type statAttr struct {
	name string
	v    float64
}

// statAttrs are the attributes of a repo's poll statistics and its poll stretch. A zero
// value is not stored (it reads back as zero), so a repo without history pays nothing
// for them.
func statAttrs(st priority.Stats, stretch float64) []statAttr {
	return []statAttr{{rPolls, st.Polls}, {rChanges, st.Changes}, {rPolled, st.Seconds},
		{rEvents, st.Events}, {rExposure, st.Exposure}, {rWinEvents, st.WinEvents}, {rWinSeconds, st.WinSeconds}, {rWinQuiet, st.WinQuiet}, {rRoot, flag(st.Root)}, {rYoung, flag(st.Young)}, {rMade, flag(st.Made)},
		{rStretch, stretch}}
}

// flag is a stored yes/no: 1 or absent.
func flag(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

// statValue is the stored form of one statistic, and whether it is stored at all.
// DynamoDB numbers stop at 1e-130, so values that decayed to practically nothing are
// dropped rather than fail the write.
func statValue(v float64) (types.AttributeValue, bool, error) {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return nil, false, fmt.Errorf("poll statistic %v is not a finite number", v)
	}
	if math.Abs(v) < minStat {
		return nil, false, nil
	}
	return avF(v), true, nil
}

// minStat is the smallest statistic stored: far below anything that moves a priority.
const minStat = 1e-100

// repoItem is the whole stored item of r at revision rev, index keys included: every
// write that replaces a repo goes through here, so the indexes stay exact.
func repoItem(r store.Repo, rev int64) (item, error) {
	if math.IsNaN(r.Priority) || math.IsInf(r.Priority, 0) {
		return nil, fmt.Errorf("dynamo: repo %s: priority %v is not a finite number", r.ID, r.Priority)
	}
	m := repoKey(r.ID)
	m[rID] = avS(r.ID)
	m[rURL] = avS(r.URL)
	m[rSource] = avS(string(r.Source))
	m[rEpoch] = avN(r.OwnerEpoch)
	m[rSalt] = avN(int64(r.Salt))
	m[rState] = avS(string(r.State))
	m[rPrio] = avF(r.Priority)
	m[rCreated] = avT(r.CreatedAt)
	m[rFetch] = avT(r.LastFetchAt)
	m[rSuccess] = avT(r.LastSuccessAt)
	m[rChange] = avT(r.LastChangeAt)
	m[rCommit] = avT(r.LastCommitAt)
	m[rCloneFail] = avN(int64(r.CloneFailCnt))
	m[rFetchFail] = avN(int64(r.FetchFailCnt))
	m[rSize] = avN(r.SizeBytes)
	m[rRev] = avN(rev)
	for _, a := range statAttrs(r.Stats, r.PollStretch) {
		av, ok, err := statValue(a.v)
		if err != nil {
			return nil, fmt.Errorf("dynamo: repo %s: %w", r.ID, err)
		}
		if ok {
			m[a.name] = av
		}
	}
	if b := r.Stats.Belief.Bytes(); b != nil {
		m[rBelief] = avB(b)
	}
	if r.SyncRequested {
		m[rSync] = avBool(true)
	}
	if r.LastError != "" {
		m[rErr] = avS(r.LastError)
	}
	if r.Upstream != "" {
		m[rUpstream] = avS(r.Upstream)
	}
	if r.RefsDigest != "" {
		m[rRefs] = avS(r.RefsDigest)
	}
	m[attrAllKey] = avS(allValue)
	if r.Owner != "" {
		m[rOwner] = avS(r.Owner)
		m[attrOwnerKey] = avS(r.Owner)
		m[attrPosKey] = avS(posKey(r.RingPos()))
	}
	if r.NeedsDecision() {
		m[attrNeedKey] = avS(needValue(r.Need()))
	}
	if r.State != store.RepoDeleting {
		m[attrStaleKey] = avS(staleKey(r.ID))
		m[attrStaleSort] = avS(staleSort(r.LastSuccessAt, r.CreatedAt, r.ID))
	}
	return m, nil
}

func decodeRepo(m item) (store.Repo, int64, error) {
	d := decoder{what: "repo", m: m}
	r := store.Repo{
		ID:            d.s(rID),
		URL:           d.s(rURL),
		Upstream:      d.s(rUpstream),
		Source:        store.Source(d.s(rSource)),
		Owner:         d.s(rOwner),
		OwnerEpoch:    d.i64(rEpoch),
		Salt:          int(d.i64(rSalt)),
		State:         store.RepoState(d.s(rState)),
		Priority:      d.f64(rPrio),
		SyncRequested: getBool(m, rSync),
		CreatedAt:     d.t(rCreated),
		LastFetchAt:   d.t(rFetch),
		LastSuccessAt: d.t(rSuccess),
		LastChangeAt:  d.t(rChange),
		LastCommitAt:  d.t(rCommit),
		CloneFailCnt:  int(d.i64(rCloneFail)),
		FetchFailCnt:  int(d.i64(rFetchFail)),
		SizeBytes:     d.i64(rSize),
		LastError:     d.s(rErr),
		Stats: priority.Stats{Polls: d.f64(rPolls), Changes: d.f64(rChanges), Seconds: d.f64(rPolled),
			Events: d.f64(rEvents), Exposure: d.f64(rExposure), WinEvents: d.f64(rWinEvents), WinSeconds: d.f64(rWinSeconds),
			WinQuiet: d.f64(rWinQuiet), Root: d.f64(rRoot) > 0, Young: d.f64(rYoung) > 0, Made: d.f64(rMade) > 0, Belief: d.belief(rBelief)},
		PollStretch: d.f64(rStretch),
		RefsDigest:  d.s(rRefs),
	}
	rev := d.i64(rRev)
	return r, rev, d.err
}

// counterAttr is the attribute counting repos in state st (on counter items and on the
// election item).
func counterAttr(st store.RepoState) string { return "n_" + string(st) }

// ---- workers ----

const (
	wID, wSlot, wStarted, wHB, wState, wDiskUsed, wDiskTotal = "wid", "slot", "started", "hb", "state", "disk_used", "disk_total"
	wFetching, wQueue, wAck, wHead, wTrimmed, wInc           = "fetching", "queue_len", "ack", "head", "trimmed", "inc"
	wBeats, wSilentBeats, wSilentSince                       = "beats", "silent_beats", "silent_since"
	// The worker's staleness summary: repos, never, and the percentiles in milliseconds.
	wStRepos, wStNever, wStP50, wStP99, wStMax = "stale_n", "stale_never", "stale_p50", "stale_p99", "stale_max"
	// Its latest unwritten polls (encodeChecks) and its fetch rate.
	wChecks, wRate = "checks", "rate"
)

// encodeChecks packs a heartbeat's checks into one binary attribute, the cheapest form
// by DynamoDB's item size rules (ADR 29): per check the repo id's 8 bytes (ids are 16
// hex digits) and its age before the heartbeat in milliseconds, rounded up, as a
// uvarint (3 bytes up to 35 minutes, 4 up to 3 days), after one byte of format
// version. A map of id to time would take about 23 bytes a check. Ids of another form
// (none are made) are left out.
func encodeChecks(at time.Time, cs []store.Check) []byte {
	out := []byte{checksV1}
	for _, c := range cs[:min(len(cs), store.MaxChecks)] {
		id, err := hex.DecodeString(c.RepoID)
		if err != nil || len(id) != checkIDLen || hex.EncodeToString(id) != c.RepoID {
			continue
		}
		age := max(0, at.Sub(c.At))
		ms := (age + time.Millisecond - 1) / time.Millisecond
		out = binary.AppendUvarint(append(out, id...), uint64(ms))
	}
	return out
}

const (
	checkIDLen = 8
	checksV1   = 1
)

// decodeChecks is encodeChecks' inverse; a malformed tail, or another version, is
// dropped.
func decodeChecks(at time.Time, b []byte) []store.Check {
	if len(b) == 0 || b[0] != checksV1 {
		return nil
	}
	b = b[1:]
	var out []store.Check
	for len(b) > checkIDLen {
		id := hex.EncodeToString(b[:checkIDLen])
		ms, n := binary.Uvarint(b[checkIDLen:])
		if n <= 0 {
			break
		}
		out = append(out, store.Check{RepoID: id, At: at.Add(-time.Duration(ms) * time.Millisecond)})
		b = b[checkIDLen+n:]
	}
	return out
}

// stalenessAttrs are the attributes of a staleness summary.
func stalenessAttrs(s store.Staleness) map[string]types.AttributeValue {
	return map[string]types.AttributeValue{
		wStRepos: avN(int64(s.Repos)), wStNever: avN(int64(s.Never)),
		wStP50: avN(s.P50.Milliseconds()), wStP99: avN(s.P99.Milliseconds()), wStMax: avN(s.Max.Milliseconds()),
	}
}

func workerItem(w store.Worker, inc string) item {
	m := workerKey(w.ID)
	m[wID] = avS(w.ID)
	m[wSlot] = avN(int64(w.Slot))
	m[wStarted] = avT(w.StartedAt)
	m[wHB] = avT(w.HeartbeatAt)
	m[wState] = avS(string(w.State))
	m[wDiskUsed] = avN(w.DiskUsed)
	m[wDiskTotal] = avN(w.DiskTotal)
	m[wFetching] = avN(int64(w.Fetching))
	m[wQueue] = avN(int64(w.QueueLen))
	m[wAck] = avU(w.AckSeq)
	m[wHead] = avU(w.OutboxHead)
	m[wTrimmed] = avU(w.TrimmedTo)
	m[wInc] = avS(inc)
	m[wBeats] = avU(w.Beats)
	m[wSilentBeats], m[wSilentSince] = avU(w.SilentBeats), avT(w.SilentSince)
	maps.Copy(m, stalenessAttrs(w.Staleness))
	if len(w.Checks) > 0 {
		m[wChecks] = avB(encodeChecks(w.HeartbeatAt, w.Checks))
	}
	if r := finiteRate(w.FetchRate); r > 0 {
		m[wRate] = avF(r)
	}
	return m
}

// storedWorker is a worker record with its registration's incarnation.
type storedWorker struct {
	store.Worker
	Inc string
}

func decodeWorker(m item) (storedWorker, error) {
	d := decoder{what: "worker", m: m}
	w := storedWorker{Worker: store.Worker{
		ID:          d.s(wID),
		Slot:        int(d.i64(wSlot)),
		StartedAt:   d.t(wStarted),
		HeartbeatAt: d.t(wHB),
		State:       store.WorkerState(d.s(wState)),
		DiskUsed:    d.i64(wDiskUsed),
		DiskTotal:   d.i64(wDiskTotal),
		Fetching:    int(d.i64(wFetching)),
		QueueLen:    int(d.i64(wQueue)),
		AckSeq:      d.u64(wAck),
		OutboxHead:  d.u64(wHead),
		TrimmedTo:   d.u64(wTrimmed),
		Beats:       d.u64(wBeats),
		SilentBeats: d.u64(wSilentBeats),
		SilentSince: d.t(wSilentSince),
		Staleness: store.Staleness{Repos: int(d.i64(wStRepos)), Never: int(d.i64(wStNever)),
			P50: time.Duration(d.i64(wStP50)) * time.Millisecond, P99: time.Duration(d.i64(wStP99)) * time.Millisecond,
			Max: time.Duration(d.i64(wStMax)) * time.Millisecond},
		FetchRate: d.f64(wRate),
	}, Inc: d.s(wInc)}
	if b, ok := m[wChecks].(*types.AttributeValueMemberB); ok {
		w.Checks = decodeChecks(w.HeartbeatAt, b.Value)
	}
	return w, d.err
}

// ---- outbox entries ----

const (
	oSeq, oOp, oRepo, oURL, oEpoch, oPrio = "seq", "op", "rid", "url", "epoch", "prio"
)

func (s *Store) entryItem(worker, inc string, e store.OutboxEntry) (item, error) {
	if math.IsNaN(e.Priority) || math.IsInf(e.Priority, 0) {
		return nil, fmt.Errorf("dynamo: outbox entry for %s: priority %v is not a finite number", e.RepoID, e.Priority)
	}
	m := key(outboxPK(worker, inc), seqSK(e.Seq))
	m[oSeq] = avU(e.Seq)
	m[oOp] = avS(string(e.Op))
	m[oEpoch] = avN(e.Epoch)
	m[oPrio] = avF(e.Priority)
	if e.RepoID != "" {
		m[oRepo] = avS(e.RepoID)
	}
	if e.URL != "" {
		m[oURL] = avS(e.URL)
	}
	if s.cfg.OutboxTTL > 0 {
		m[attrTTL] = avN(s.cfg.Now().Add(s.cfg.OutboxTTL).Unix())
	}
	return m, nil
}

func decodeEntry(m item) (store.OutboxEntry, error) {
	d := decoder{what: "outbox entry", m: m}
	e := store.OutboxEntry{
		Seq:      d.u64(oSeq),
		Op:       store.OutboxOp(d.s(oOp)),
		RepoID:   d.s(oRepo),
		URL:      d.s(oURL),
		Epoch:    d.i64(oEpoch),
		Priority: d.f64(oPrio),
	}
	return e, d.err
}

// ---- election, list sync ----

const (
	eVersion, eTerm, eVotedFor, eLease, eLastCall = "version", "term", "voted_for", "lease_until", "last_call"
	lVersion, lCommit, lApplied, lExtra           = "version", "commit", "applied_at", "extra"
	attrWorkersV                                  = "v"
)

func decodeElection(m item) (store.Election, error) {
	d := decoder{what: "election", m: m}
	e := store.Election{
		Version:      d.i64(eVersion),
		Term:         d.i64(eTerm),
		VotedFor:     d.s(eVotedFor),
		LeaseUntil:   d.t(eLease),
		LastCallTime: d.t(eLastCall),
	}
	return e, d.err
}

// sweepItem keeps the sweep's state as JSON beside its version: nothing queries it.
func sweepItem(sw store.Sweep) (item, error) {
	b, err := json.Marshal(sw)
	if err != nil {
		return nil, fmt.Errorf("dynamo: encode sweep: %w", err)
	}
	m := sweepKey()
	m[lVersion] = avN(sw.Version)
	m[lExtra] = avB(b)
	return m, nil
}

func decodeSweep(m item) (store.Sweep, error) {
	var sw store.Sweep
	if err := json.Unmarshal(getB(m, lExtra), &sw); err != nil {
		return store.Sweep{}, fmt.Errorf("dynamo: decode sweep: %w", err)
	}
	sw.Version = versionOf(m)
	return sw, nil
}

func listSyncItem(l store.ListSync) item {
	m := listSyncKey()
	m[lVersion] = avN(l.Version)
	m[lCommit] = avS(l.Commit)
	m[lApplied] = avT(l.AppliedAt)
	if len(l.Extra) > 0 {
		m[lExtra] = avB(l.Extra)
	}
	return m
}

func decodeListSync(m item) (store.ListSync, error) {
	d := decoder{what: "list sync", m: m}
	l := store.ListSync{
		Version:   d.i64(lVersion),
		Commit:    d.s(lCommit),
		AppliedAt: d.t(lApplied),
	}
	if b := getB(m, lExtra); len(b) > 0 {
		l.Extra = append([]byte(nil), b...)
	}
	return l, d.err
}

// versionOf reads the version attribute of a versioned singleton (0 when absent).
func versionOf(m item) int64 {
	if m == nil {
		return 0
	}
	d := decoder{m: m}
	return d.i64("version")
}
