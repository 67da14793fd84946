package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/mirrorfleet/mirrorfleet/bench/internal/results"
)

// meter sits between the store's DynamoDB client and DynamoDB Local. While on, it
// records every call: the units DynamoDB Local reports (through Config.OnConsumed, which
// also names the store method) and the units AWS would bill, computed from the items the
// call read or wrote. Written items are read before and after the call through a second,
// unmetered client, so the larger of the two sizes and every index key change are known.
type meter struct {
	base      http.RoundTripper
	side      *dynamodb.Client
	table     string
	tableKeys []string
	indexes   []gsi

	mu    sync.Mutex
	on    bool
	calls []*call
	err   error // first failure to meter a call
}

// call is one DynamoDB request.
type call struct {
	op  string // "Method/API", from OnConsumed; "" until named
	api string
	u   results.StoreCostUnits
}

const apiPrefix = "DynamoDB_20120810."

func newMeter(base http.RoundTripper) *meter { return &meter{base: base} }

// describe learns the table's keys and indexes.
func (m *meter) describe(ctx context.Context, side *dynamodb.Client, table string) error {
	out, err := side.DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(table)})
	if err != nil {
		return fmt.Errorf("describe %s: %w", table, err)
	}
	var keys []string
	for _, k := range out.Table.KeySchema {
		keys = append(keys, aws.ToString(k.AttributeName))
	}
	var idx []gsi
	for _, g := range out.Table.GlobalSecondaryIndexes {
		x := gsi{Name: aws.ToString(g.IndexName)}
		for _, k := range g.KeySchema {
			if k.KeyType == types.KeyTypeHash {
				x.PK = aws.ToString(k.AttributeName)
			} else {
				x.SK = aws.ToString(k.AttributeName)
			}
		}
		idx = append(idx, x)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.side, m.table, m.tableKeys, m.indexes = side, table, keys, idx
	return nil
}

// start clears the record and meters from now on.
func (m *meter) start() {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.on, m.calls = true, nil
}

// stop ends metering and returns the calls since start.
func (m *meter) stop() ([]*call, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	calls, err := m.calls, m.err
	m.on, m.calls, m.err = false, nil, nil
	return calls, err
}

// mark is the number of calls recorded so far (to attribute later calls to an event).
func (m *meter) mark() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.calls)
}

func (m *meter) fail(err error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.err == nil {
		m.err = err
	}
}

// consumed is the store's Config.OnConsumed: it names the call that just returned. The
// store is used from one goroutine and reports a call's capacity as soon as it returns,
// so the newest recorded call is the one.
func (m *meter) consumed(op string, cc types.ConsumedCapacity) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if !m.on || len(m.calls) == 0 {
		return
	}
	c := m.calls[len(m.calls)-1]
	if c.op != "" || !strings.HasSuffix(op, "/"+c.api) {
		return
	}
	c.op = op
	r, w := aws.ToFloat64(cc.ReadCapacityUnits), aws.ToFloat64(cc.WriteCapacityUnits)
	if r == 0 && w == 0 {
		if isRead(c.api) {
			r = aws.ToFloat64(cc.CapacityUnits)
		} else {
			w = aws.ToFloat64(cc.CapacityUnits)
		}
	}
	c.u.LocalRCU += r
	c.u.LocalWCU += w
}

func isRead(api string) bool {
	switch api {
	case "GetItem", "BatchGetItem", "Query", "Scan", "TransactGetItems":
		return true
	}
	return false
}

func isWrite(api string) bool {
	switch api {
	case "PutItem", "UpdateItem", "DeleteItem", "BatchWriteItem", "TransactWriteItems":
		return true
	}
	return false
}

// RoundTrip forwards the request and, while metering, records what it costs.
func (m *meter) RoundTrip(req *http.Request) (*http.Response, error) {
	api, ok := strings.CutPrefix(req.Header.Get("X-Amz-Target"), apiPrefix)
	m.mu.Lock()
	on := m.on
	m.mu.Unlock()
	if !ok || !on || !(isRead(api) || isWrite(api)) {
		return m.base.RoundTrip(req)
	}
	var body []byte
	if req.Body != nil {
		b, err := io.ReadAll(req.Body)
		req.Body.Close()
		if err != nil {
			return nil, fmt.Errorf("meter: read request: %w", err)
		}
		body = b
		req.Body = io.NopCloser(bytes.NewReader(body))
	}
	ctx := req.Context()
	in, err := decodeRequest(api, body)
	if err != nil {
		m.fail(err)
	}
	keys := m.writeKeys(api, in)
	var before map[string]map[string]types.AttributeValue
	if len(keys) > 0 {
		if before, err = m.fetch(ctx, keys); err != nil {
			m.fail(err)
		}
	}
	resp, rerr := m.base.RoundTrip(req)
	if rerr != nil {
		return resp, rerr
	}
	rb, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	resp.Body = io.NopCloser(bytes.NewReader(rb))
	if err != nil {
		return resp, nil // the SDK sees the same short body and reports it
	}
	c := &call{api: api}
	c.u.Calls = 1
	c.u.Bytes = float64(len(body) + len(rb))
	if isWrite(api) {
		c.u.WriteCalls = 1
		after, err := m.fetch(ctx, keys)
		if err != nil {
			m.fail(err)
		}
		c.u.AWSWCU, c.u.AWSIndexWCU = m.writeCost(api, keys, before, after)
		c.u.AWSWCU += c.u.AWSIndexWCU
	} else if resp.StatusCode == http.StatusOK {
		var out response
		if err := json.Unmarshal(rb, &out); err != nil {
			m.fail(fmt.Errorf("meter: %s response: %w", api, err))
		} else if c.u.AWSRCU, err = m.readCost(ctx, api, in, out); err != nil {
			m.fail(err)
		}
	}
	m.mu.Lock()
	m.calls = append(m.calls, c)
	m.mu.Unlock()
	return resp, nil
}

// writeKeys lists the keys a write touches, in order, transactional or not.
func (m *meter) writeKeys(api string, in request) []wireItem {
	var keys []wireItem
	switch api {
	case "PutItem":
		keys = append(keys, in.Item)
	case "UpdateItem", "DeleteItem":
		keys = append(keys, in.Key)
	case "BatchWriteItem":
		for _, reqs := range in.batchWrite {
			for _, w := range reqs {
				keys = append(keys, w.key())
			}
		}
	case "TransactWriteItems":
		for _, t := range in.TransactItems {
			keys = append(keys, t.key())
		}
	}
	for i, k := range keys {
		keys[i] = m.keyOf(k)
	}
	return keys
}

// keyOf keeps the table's key attributes of a wire item.
func (m *meter) keyOf(it wireItem) wireItem {
	k := wireItem{}
	for _, a := range m.tableKeys {
		if v, ok := it[a]; ok {
			k[a] = v
		}
	}
	return k
}

// keyString identifies a key by its attributes' values in key-schema order.
func (m *meter) keyString(k wireItem) string {
	av, err := decodeItem(k)
	if err != nil {
		return ""
	}
	return m.keyStringAV(av)
}

func (m *meter) keyStringAV(it map[string]types.AttributeValue) string {
	var b strings.Builder
	for _, a := range m.tableKeys {
		b.WriteString(scalar(it[a]))
		b.WriteByte(0)
	}
	return b.String()
}

// fetch reads the current items at keys, strongly consistent, through the side client.
func (m *meter) fetch(ctx context.Context, keys []wireItem) (map[string]map[string]types.AttributeValue, error) {
	found := map[string]map[string]types.AttributeValue{}
	seen := map[string]bool{}
	var todo []map[string]types.AttributeValue
	for _, k := range keys {
		ks := m.keyString(k)
		if seen[ks] {
			continue
		}
		seen[ks] = true
		av, err := decodeItem(k)
		if err != nil {
			return nil, fmt.Errorf("meter: key: %w", err)
		}
		todo = append(todo, av)
	}
	for len(todo) > 0 {
		n := min(len(todo), 100)
		pending := map[string]types.KeysAndAttributes{m.table: {Keys: todo[:n], ConsistentRead: aws.Bool(true)}}
		todo = todo[n:]
		for len(pending) > 0 {
			out, err := m.side.BatchGetItem(ctx, &dynamodb.BatchGetItemInput{RequestItems: pending})
			if err != nil {
				return nil, fmt.Errorf("meter: read items: %w", err)
			}
			for _, it := range out.Responses[m.table] {
				found[m.keyStringAV(it)] = it
			}
			pending = out.UnprocessedKeys
			if ka, ok := pending[m.table]; ok && len(ka.Keys) == 0 {
				pending = nil
			}
		}
	}
	return found, nil
}

// writeCost applies the write rules to every key a write touched.
func (m *meter) writeCost(api string, keys []wireItem, before, after map[string]map[string]types.AttributeValue) (wcu, index float64) {
	txn := api == "TransactWriteItems"
	for _, k := range keys {
		ks := m.keyString(k)
		b, a := before[ks], after[ks]
		wcu += writeUnits(sizeOrZero(b), sizeOrZero(a), txn)
		index += indexWrites(b, a, m.indexes, m.tableKeys)
	}
	return wcu, index
}

func sizeOrZero(it map[string]types.AttributeValue) int {
	if it == nil {
		return 0
	}
	return itemSize(it)
}

// readCost applies the read rules to a successful read.
func (m *meter) readCost(ctx context.Context, api string, in request, out response) (float64, error) {
	switch api {
	case "GetItem":
		it, err := decodeItem(out.Item)
		if err != nil {
			return 0, err
		}
		return readUnits([]int{sizeOrZero(it)}, in.ConsistentRead), nil
	case "BatchGetItem":
		u := 0.0
		for table, ka := range in.batchGet {
			var sizes []int
			for _, raw := range out.Responses[table] {
				it, err := decodeItem(raw)
				if err != nil {
					return 0, err
				}
				sizes = append(sizes, itemSize(it))
			}
			missing := len(ka.Keys) - len(out.UnprocessedKeys[table].Keys) - len(sizes)
			for range max(missing, 0) {
				sizes = append(sizes, 0)
			}
			u += readUnits(sizes, ka.ConsistentRead)
		}
		return u, nil
	case "Query", "Scan":
		total := 0
		var g *gsi
		if in.IndexName != "" {
			i := slices.IndexFunc(m.indexes, func(x gsi) bool { return x.Name == in.IndexName })
			if i < 0 {
				return 0, fmt.Errorf("meter: query on unknown index %q", in.IndexName)
			}
			g = &m.indexes[i]
		}
		if g != nil || in.Projection != "" {
			// The page is billed on full items (or full index entries), not on the
			// projection returned: read them whole.
			keys := make([]wireItem, len(out.Items))
			for i, it := range out.Items {
				keys[i] = m.keyOf(it)
			}
			full, err := m.fetch(ctx, keys)
			if err != nil {
				return 0, err
			}
			for _, k := range keys {
				it := full[m.keyString(k)]
				if g != nil {
					it = g.entry(it, m.tableKeys)
				}
				total += sizeOrZero(it)
			}
		} else {
			for _, raw := range out.Items {
				it, err := decodeItem(raw)
				if err != nil {
					return 0, err
				}
				total += itemSize(it)
			}
		}
		return queryUnits(total, g == nil && in.ConsistentRead), nil
	}
	return 0, nil
}

// aggregate sums calls by operation; with n > 1 the figures are per event (divided by n).
func aggregate(calls []*call, n int) (results.StoreCostUnits, []results.StoreCostOp) {
	by := map[string]*results.StoreCostUnits{}
	var total results.StoreCostUnits
	for _, c := range calls {
		op := c.op
		if op == "" {
			op = "(unreported)/" + c.api // a call that failed: the store reports no capacity
		}
		u := by[op]
		if u == nil {
			u = &results.StoreCostUnits{}
			by[op] = u
		}
		add(u, c.u)
		add(&total, c.u)
	}
	var ops []results.StoreCostOp
	for _, op := range slices.Sorted(func(yield func(string) bool) {
		for k := range by {
			if !yield(k) {
				return
			}
		}
	}) {
		ops = append(ops, results.StoreCostOp{Op: op, StoreCostUnits: scale(*by[op], n)})
	}
	return scale(total, n), ops
}

func add(a *results.StoreCostUnits, b results.StoreCostUnits) {
	a.Calls += b.Calls
	a.WriteCalls += b.WriteCalls
	a.LocalRCU += b.LocalRCU
	a.LocalWCU += b.LocalWCU
	a.AWSRCU += b.AWSRCU
	a.AWSWCU += b.AWSWCU
	a.AWSIndexWCU += b.AWSIndexWCU
	a.Bytes += b.Bytes
}

// scale divides the unit figures by n; call counts stay totals when n is 1 and are
// rounded means otherwise.
func scale(u results.StoreCostUnits, n int) results.StoreCostUnits {
	if n <= 1 {
		return u
	}
	f := float64(n)
	return results.StoreCostUnits{
		Calls: int(float64(u.Calls)/f + 0.5), WriteCalls: int(float64(u.WriteCalls)/f + 0.5),
		LocalRCU: u.LocalRCU / f, LocalWCU: u.LocalWCU / f, AWSRCU: u.AWSRCU / f, AWSWCU: u.AWSWCU / f,
		AWSIndexWCU: u.AWSIndexWCU / f, Bytes: u.Bytes / f,
	}
}
