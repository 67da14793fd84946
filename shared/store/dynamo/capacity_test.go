package dynamo

import (
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/mirrorfleet/mirrorfleet/shared/store"
)

// meter sums consumed capacity reported through Config.OnConsumed.
type meter struct {
	mu          sync.Mutex
	calls       int
	read, write float64
	apis        map[string]int
}

func (m *meter) record(op string, cc types.ConsumedCapacity) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.calls++
	if m.apis == nil {
		m.apis = map[string]int{}
	}
	m.apis[op[strings.Index(op, "/")+1:]]++
	r, w := aws.ToFloat64(cc.ReadCapacityUnits), aws.ToFloat64(cc.WriteCapacityUnits)
	if r == 0 && w == 0 { // only the total was reported: tell reads from writes by the API
		if strings.Contains(op, "Get") || strings.Contains(op, "Query") || strings.Contains(op, "Scan") {
			r = aws.ToFloat64(cc.CapacityUnits)
		} else {
			w = aws.ToFloat64(cc.CapacityUnits)
		}
	}
	m.read += r
	m.write += w
}

func (m *meter) take() (calls int, read, write float64, apis string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var parts []string
	for _, api := range slices.Sorted(func(yield func(string) bool) {
		for k := range m.apis {
			if !yield(k) {
				return
			}
		}
	}) {
		parts = append(parts, fmt.Sprintf("%s×%d", api, m.apis[api]))
	}
	calls, read, write, apis = m.calls, m.read, m.write, strings.Join(parts, " ")
	m.calls, m.read, m.write, m.apis = 0, 0, 0, nil
	return
}

// TestConsumedCapacity measures, on DynamoDB Local with ReturnConsumedCapacity=TOTAL,
// what the operations of a coordinator tick and of a worker heartbeat cost, and logs it
// (go test -v -run TestConsumedCapacity). docs/store-dynamodb.md explains the figures.
func TestConsumedCapacity(t *testing.T) {
	t.Parallel()
	tr := localTier(t)
	ctx := t.Context()
	var m meter
	s := newStore(t, tr.client, Config{OnConsumed: m.record})

	type row struct {
		op          string
		calls       int
		read, write float64
		apis        string
	}
	var rows []row
	measure := func(op string, fn func() error) {
		t.Helper()
		m.take()
		if err := fn(); err != nil {
			t.Fatalf("%s: %v", op, err)
		}
		calls, r, w, apis := m.take()
		rows = append(rows, row{op, calls, r, w, apis})
	}

	var term int64
	measure("election campaign: take term 1 (CASElection)", func() error {
		e, err := s.CASElection(ctx, 0, store.Election{Term: 1, VotedFor: "coord-a", LeaseUntil: t0.Add(time.Minute), LastCallTime: t0})
		term = e.Term
		return err
	})
	measure("election campaign: renew (GetElection + CASElection)", func() error {
		e, err := s.GetElection(ctx)
		if err != nil {
			return err
		}
		e.LeaseUntil = e.LeaseUntil.Add(time.Minute)
		_, err = s.CASElection(ctx, e.Version, e)
		return err
	})
	measure("worker join (ClaimSlot)", func() error {
		_, err := s.ClaimSlot(ctx, store.Worker{ID: "worker-a", StartedAt: t0}, 1024)
		return err
	})
	var repos []store.Repo
	for i := range 10 {
		op := "CreateRepo"
		if i > 0 {
			op = "" // measure one
		}
		fn := func() error {
			r, _, err := s.CreateRepo(ctx, testRepo(i))
			repos = append(repos, r)
			return err
		}
		if op == "" {
			if err := fn(); err != nil {
				t.Fatal(err)
			}
			continue
		}
		measure("API: CreateRepo", fn)
	}
	measure("tick read: GetRing (empty)", func() error { _, err := s.GetRing(ctx); return err })
	measure("tick read: ListWorkers (1 worker)", func() error { _, err := s.ListWorkers(ctx); return err })
	measure("tick read: ListReposNeedingDecision (10 pending)", func() error {
		_, _, err := s.ListReposNeedingDecision(ctx, store.NeedOwner, "", 1000)
		return err
	})
	measure("Apply: 10 AssignRepo + AppendOutbox of 10 entries", func() error {
		var muts []store.Mutation
		var entries []store.OutboxEntry
		for _, r := range repos {
			muts = append(muts, store.AssignRepo{ID: r.ID, Owner: "worker-a", State: store.RepoCloning, Priority: 1})
			entries = append(entries, store.OutboxEntry{Op: store.OpAdd, RepoID: r.ID, URL: r.URL, Epoch: 1, Priority: 1})
		}
		muts = append(muts, store.AppendOutbox{Worker: "worker-a", Entries: entries})
		return s.Apply(ctx, term, muts)
	})
	measure("Apply: PutRing (1 member, 64 tokens)", func() error {
		return s.Apply(ctx, term, []store.Mutation{store.PutRing{Ring: bigRing(1, 9)}})
	})
	measure("Apply: PutRing (1000 members, 64k tokens, chunked)", func() error {
		return s.Apply(ctx, term, []store.Mutation{store.PutRing{Ring: bigRing(1000, 9), ExpectVersion: 1}})
	})
	measure("tick read: GetRing (1000 members, chunked, another process)", func() error {
		fresh, err := New(ctx, Config{Client: tr.client, Table: s.Table(), OnConsumed: m.record})
		if err == nil {
			_, err = fresh.GetRing(ctx)
		}
		return err
	})
	measure("tick read: GetRing (1000 members, chunked, cached)", func() error { _, err := s.GetRing(ctx); return err })
	var hb store.Worker
	measure("worker heartbeat (Heartbeat)", func() error {
		var err error
		hb, err = s.Heartbeat(ctx, "worker-a", store.Heartbeat{At: t0.Add(10 * time.Second), DiskUsed: 1 << 30, DiskTotal: 1 << 40, AckSeq: 0})
		return err
	})
	measure("worker heartbeat: ReadOutbox (10 entries)", func() error {
		es, err := s.ReadOutbox(ctx, "worker-a", hb.AckSeq, 1000)
		if err == nil && len(es) != 10 {
			err = fmt.Errorf("read %d entries", len(es))
		}
		return err
	})
	measure("worker heartbeat: ReadOutbox (nothing new)", func() error {
		_, err := s.ReadOutbox(ctx, "worker-a", 10, 1000)
		return err
	})
	measure("ReportFetch: cloning → ok (state change: read + transaction)", func() error {
		return s.ReportFetch(ctx, repos[0].ID, "worker-a", 1, store.FetchReport{State: store.RepoOK, LastFetchAt: t0, LastSuccessAt: t0, Priority: 2})
	})
	measure("ReportFetch: ok → ok (one UpdateItem)", func() error {
		return s.ReportFetch(ctx, repos[0].ID, "worker-a", 1, store.FetchReport{State: store.RepoOK, LastFetchAt: t0.Add(time.Hour), LastSuccessAt: t0.Add(time.Hour), Priority: 3})
	})
	measure("Apply: TrimOutbox through 10 (+ clean-up of 10 entries)", func() error {
		return s.Apply(ctx, term, []store.Mutation{store.TrimOutbox{Worker: "worker-a", Through: 10}})
	})
	measure("status: CountRepos", func() error { _, err := s.CountRepos(ctx); return err })
	measure("status: ListStalest(20)", func() error { _, err := s.ListStalest(ctx, 20); return err })
	measure("API: ListRepos(page of 10)", func() error { _, _, err := s.ListRepos(ctx, "", 10); return err })

	var b strings.Builder
	fmt.Fprintf(&b, "consumed capacity on DynamoDB Local (ReturnConsumedCapacity=TOTAL):\n")
	fmt.Fprintf(&b, "%-66s %5s %8s %8s  %s\n", "operation", "calls", "RCU", "WCU", "API calls")
	for _, r := range rows {
		fmt.Fprintf(&b, "%-66s %5d %8.1f %8.1f  %s\n", r.op, r.calls, r.read, r.write, r.apis)
	}
	t.Log(b.String())
	for _, r := range rows {
		if r.calls == 0 {
			t.Errorf("%s: no consumed capacity reported", r.op)
		}
	}
}

// TestHeartbeatChecksCost measures what carrying the latest unwritten polls costs a
// heartbeat (ADR 29): with store.MaxChecks of them, the oldest days old, in the binary
// form the store writes, the worker's item stays under 1 KB and a heartbeat costs one
// write unit, as one without them; the same checks as a map of id to time would cost two.
func TestHeartbeatChecksCost(t *testing.T) {
	t.Parallel()
	tr := localTier(t)
	ctx := t.Context()
	var m meter
	s := newStore(t, tr.client, Config{OnConsumed: m.record})
	id := "0123456789abcdef0123456789abcdef" // an ECS task id: the longest worker id the stack makes
	if _, err := s.ClaimSlot(ctx, store.Worker{ID: id, StartedAt: t0}, 1024); err != nil {
		t.Fatal(err)
	}
	at := t0.Add(time.Hour)
	var checks []store.Check
	for i := range store.MaxChecks {
		// Ages up to three days: 4-byte varints, the worst the worker sends.
		checks = append(checks, store.Check{RepoID: fmt.Sprintf("%016x", uint64(i)*0x9e3779b97f4a7c15), At: at.Add(-time.Duration(i) * 90 * time.Minute)})
	}
	hb := store.Heartbeat{At: at, DiskUsed: 123 << 30, DiskTotal: 1 << 40, Fetching: 10, QueueLen: 99999, AckSeq: 123456, FetchRate: 3.1415926,
		Staleness: store.Staleness{Repos: 99999, Never: 12, P50: 5 * time.Hour, P99: 30 * time.Hour, Max: 200 * time.Hour}}
	beat := func(hb store.Heartbeat) float64 {
		t.Helper()
		m.take()
		w, err := s.Heartbeat(ctx, id, hb)
		if err != nil {
			t.Fatal(err)
		}
		if len(w.Checks) != len(hb.Checks) {
			t.Fatalf("heartbeat kept %d checks of %d", len(w.Checks), len(hb.Checks))
		}
		_, _, wcu, _ := m.take()
		return wcu
	}
	without := beat(hb)
	hb.Checks = checks
	with := beat(hb)
	got, err := s.db.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(s.table), Key: workerKey(id)})
	if err != nil {
		t.Fatal(err)
	}
	packed := len(got.Item[wChecks].(*types.AttributeValueMemberB).Value)

	// The alternative: the same checks as a map attribute {repo id: unix ms}.
	mv := map[string]types.AttributeValue{}
	for _, c := range checks {
		mv[c.RepoID] = avN(c.At.UnixMilli())
	}
	m.take()
	if _, err := s.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{TableName: aws.String(s.table), Key: workerKey(id),
		UpdateExpression:          aws.String("SET #c = :c"),
		ExpressionAttributeNames:  map[string]string{"#c": wChecks},
		ExpressionAttributeValues: map[string]types.AttributeValue{":c": &types.AttributeValueMemberM{Value: mv}},
		ReturnConsumedCapacity:    types.ReturnConsumedCapacityTotal}); err != nil {
		t.Fatal(err)
	}
	// Charged on the larger of before and after: the next heartbeat, which writes the
	// binary form back, pays for the map item it replaces.
	_, _, _, _ = m.take()
	asMap := beat(hb)
	t.Logf("heartbeat WCU: %.0f without checks, %.0f with %d checks packed (%d bytes), %.0f replacing them as a map",
		without, with, len(checks), packed, asMap)
	if without != 1 || with != 1 {
		t.Errorf("a heartbeat costs %v WCU without checks and %v with %d, want 1 and 1", without, with, len(checks))
	}
	if asMap <= with {
		t.Errorf("the map form cost %v WCU, no more than the packed form's %v: the measurement is wrong", asMap, with)
	}
}
