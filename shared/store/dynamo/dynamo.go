// Package dynamo implements the store (storetest.Store) on one DynamoDB table (docs/store-dynamodb.md).
//
// The table layout, the indexes and what each operation costs are described in
// docs/store-dynamodb.md; why every coordinator write is fenced by the election term, and
// what that costs, in docs/adr/0005-dynamodb-fencing.md. In short:
//
//   - Apply is one TransactWriteItems: a condition on the election item (term = T) plus
//     the mutations, each conditioned on the item being as the store read it just before
//     (a consistent BatchGetItem). The mutations' own conditions (owner, epoch, heartbeat,
//     outbox head, versions) are checked on that read; a write racing in between fails the
//     transaction, and Apply reads again and decides again.
//   - What one transaction cannot do — drop any number of outbox entries, free a slot
//     bitmap, hold a 2.7 MB ring — is split: the transaction moves a trim point, deletes a
//     per-slot item, or flips the ring head to chunks written beforehand; the bulk work
//     happens outside it, and readers never see its leftovers.
//   - Secondary indexes are keys-only; listings read them, then fetch the items with a
//     strongly consistent BatchGetItem and drop the ones that no longer match.
package dynamo

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"strconv"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/mirrorfleet/mirrorfleet/shared/priority"
)

// Config configures a Store.
type Config struct {
	// Client talks to DynamoDB (or DynamoDB Local, LocalStack, a test server).
	Client *dynamodb.Client
	// Table is the table name (3 to 255 characters of [a-zA-Z0-9_.-]).
	Table string
	// OutboxTTL is how long after it was written an outbox entry may be removed by
	// DynamoDB's TTL, a backstop for entries whose post-transaction clean-up failed.
	// Zero means DefaultOutboxTTL; negative writes no TTL attribute.
	OutboxTTL time.Duration
	// OnConsumed, if set, is called with the capacity each DynamoDB call consumed (the
	// store then asks for ReturnConsumedCapacity=TOTAL). op is "Method/API", e.g.
	// "Heartbeat/UpdateItem". Callers sum these per coordinator tick or per heartbeat.
	OnConsumed func(op string, cc types.ConsumedCapacity)
	// Now is the wall clock used for TTL timestamps; nil means time.Now.
	Now func() time.Time
	// Log receives warnings about best-effort clean-up that failed; nil means slog.Default().
	Log *slog.Logger
}

// DefaultOutboxTTL: a live worker acks its entries within seconds and the coordinator
// trims them at its next tick, so a week-old entry belongs to a worker long declared dead.
const DefaultOutboxTTL = 7 * 24 * time.Hour

// Store is the store on one DynamoDB table. It is safe for concurrent use.
type Store struct {
	db    *dynamodb.Client
	table string
	cfg   Config
	ring  ringCache
}

// New returns a Store on cfg.Table. It does not create the table: see CreateTable.
func New(ctx context.Context, cfg Config) (*Store, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if cfg.Client == nil {
		return nil, errors.New("dynamo: Config.Client is nil")
	}
	if err := validTableName(cfg.Table); err != nil {
		return nil, err
	}
	if cfg.OutboxTTL == 0 {
		cfg.OutboxTTL = DefaultOutboxTTL
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Log == nil {
		cfg.Log = slog.Default()
	}
	return &Store{db: cfg.Client, table: cfg.Table, cfg: cfg}, nil
}

func validTableName(name string) error {
	if len(name) < 3 || len(name) > 255 {
		return fmt.Errorf("dynamo: table name %q must have 3 to 255 characters", name)
	}
	for _, c := range name {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-' || c == '.') {
			return fmt.Errorf("dynamo: table name %q: only [a-zA-Z0-9_.-] allowed", name)
		}
	}
	return nil
}

// Table is the table name.
func (s *Store) Table() string { return s.table }

// Close does nothing: the client belongs to the caller.
func (s *Store) Close() error { return nil }

// ---- consumed capacity ----

func (s *Store) rcc() types.ReturnConsumedCapacity {
	if s.cfg.OnConsumed == nil {
		return types.ReturnConsumedCapacityNone
	}
	return types.ReturnConsumedCapacityTotal
}

func (s *Store) consumed(op string, ccs ...types.ConsumedCapacity) {
	if s.cfg.OnConsumed == nil {
		return
	}
	for _, cc := range ccs {
		s.cfg.OnConsumed(op, cc)
	}
}

func (s *Store) consumedPtr(op string, cc *types.ConsumedCapacity) {
	if cc != nil {
		s.consumed(op, *cc)
	}
}

// ---- errors and retries ----

// maxAttempts bounds the retries of an optimistic write that keeps losing races (a
// transaction conflict, or an item that changed between the read and the write).
const maxAttempts = 12

// backoff sleeps before retry attempt (1, 2, ...): exponential from 5 ms, capped at
// 250 ms, full jitter. It returns the context's error if it ends first.
func backoff(ctx context.Context, attempt int) error {
	d := 5 * time.Millisecond << min(attempt, 6)
	d = min(d, 250*time.Millisecond)
	t := time.NewTimer(time.Duration(rand.Int64N(int64(d)) + int64(time.Millisecond)))
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

func isConditionFailed(err error) bool {
	_, ok := errors.AsType[*types.ConditionalCheckFailedException](err)
	return ok
}

// isTxConflict: a single-item write ran into an ongoing transaction on the same item.
func isTxConflict(err error) bool {
	_, ok := errors.AsType[*types.TransactionConflictException](err)
	return ok
}

// cancelReasons returns the per-action reasons of a canceled transaction, or nil if err
// is something else.
func cancelReasons(err error) ([]types.CancellationReason, bool) {
	tce, ok := errors.AsType[*types.TransactionCanceledException](err)
	if !ok {
		return nil, false
	}
	return tce.CancellationReasons, true
}

func reasonCode(r types.CancellationReason) string { return aws.ToString(r.Code) }

// txOutcome classifies a canceled transaction's reasons.
type txOutcome struct {
	failed   []int // actions whose condition failed
	conflict bool  // another transaction held an item: retry
	other    string
}

func classify(reasons []types.CancellationReason) txOutcome {
	var o txOutcome
	for i, r := range reasons {
		switch code := reasonCode(r); code {
		case "", "None":
		case "ConditionalCheckFailed":
			o.failed = append(o.failed, i)
		case "TransactionConflict", "ThrottlingError", "ProvisionedThroughputExceeded", "RequestLimitExceeded":
			o.conflict = true
		default:
			if o.other == "" {
				o.other = code + ": " + aws.ToString(r.Message)
			}
		}
	}
	return o
}

// ---- expressions ----

// expr collects placeholder names and values for one expression set, so attribute names
// never clash with DynamoDB's reserved words.
type expr struct {
	names  map[string]string
	values map[string]types.AttributeValue
	byName map[string]string
}

// n returns the placeholder for attribute name a.
func (e *expr) n(a string) string {
	if p, ok := e.byName[a]; ok {
		return p
	}
	if e.names == nil {
		e.names, e.byName = map[string]string{}, map[string]string{}
	}
	p := "#n" + strconv.Itoa(len(e.names))
	e.names[p], e.byName[a] = a, p
	return p
}

// v returns a fresh placeholder for value av.
func (e *expr) v(av types.AttributeValue) string {
	if e.values == nil {
		e.values = map[string]types.AttributeValue{}
	}
	p := ":v" + strconv.Itoa(len(e.values))
	e.values[p] = av
	return p
}

// Names and Values return nil when empty: DynamoDB rejects empty maps.
func (e *expr) Names() map[string]string {
	if len(e.names) == 0 {
		return nil
	}
	return e.names
}

func (e *expr) Values() map[string]types.AttributeValue {
	if len(e.values) == 0 {
		return nil
	}
	return e.values
}

// eq is "a = v".
func (e *expr) eq(a string, av types.AttributeValue) string { return e.n(a) + " = " + e.v(av) }

func (e *expr) exists() string    { return "attribute_exists(" + e.n(attrPK) + ")" }
func (e *expr) notExists() string { return "attribute_not_exists(" + e.n(attrPK) + ")" }

// ---- attribute values ----

func avS(v string) types.AttributeValue { return &types.AttributeValueMemberS{Value: v} }
func avN(v int64) types.AttributeValue {
	return &types.AttributeValueMemberN{Value: strconv.FormatInt(v, 10)}
}
func avU(v uint64) types.AttributeValue {
	return &types.AttributeValueMemberN{Value: strconv.FormatUint(v, 10)}
}
func avB(v []byte) types.AttributeValue    { return &types.AttributeValueMemberB{Value: v} }
func avBool(v bool) types.AttributeValue   { return &types.AttributeValueMemberBOOL{Value: v} }
func avT(t time.Time) types.AttributeValue { return avS(fmtTime(t)) }

func avF(v float64) types.AttributeValue {
	return &types.AttributeValueMemberN{Value: strconv.FormatFloat(v, 'g', -1, 64)}
}

// fmtTime is the stored form of a time: UTC RFC 3339 with nanoseconds. One instant has
// exactly one form, so conditions compare instants exactly (the zone and the monotonic
// reading are dropped, as the suite requires).
func fmtTime(t time.Time) string { return t.UTC().Format(time.RFC3339Nano) }

type item = map[string]types.AttributeValue

func getS(m item, a string) string {
	if v, ok := m[a].(*types.AttributeValueMemberS); ok {
		return v.Value
	}
	return ""
}

func getB(m item, a string) []byte {
	if v, ok := m[a].(*types.AttributeValueMemberB); ok {
		return v.Value
	}
	return nil
}

func getBool(m item, a string) bool {
	v, ok := m[a].(*types.AttributeValueMemberBOOL)
	return ok && v.Value
}

func getNum(m item, a string) string {
	if v, ok := m[a].(*types.AttributeValueMemberN); ok {
		return v.Value
	}
	return ""
}

// decoder reads typed attributes and remembers the first malformed one.
type decoder struct {
	what string
	m    item
	err  error
}

func (d *decoder) fail(a, raw string, err error) {
	if d.err == nil {
		d.err = fmt.Errorf("dynamo: decode %s attribute %s=%q: %w", d.what, a, raw, err)
	}
}

func (d *decoder) s(a string) string { return getS(d.m, a) }

func (d *decoder) i64(a string) int64 {
	raw := getNum(d.m, a)
	if raw == "" {
		return 0
	}
	v, err := strconv.ParseInt(raw, 10, 64)
	if err != nil {
		d.fail(a, raw, err)
	}
	return v
}

func (d *decoder) u64(a string) uint64 {
	raw := getNum(d.m, a)
	if raw == "" {
		return 0
	}
	v, err := strconv.ParseUint(raw, 10, 64)
	if err != nil {
		d.fail(a, raw, err)
	}
	return v
}

func (d *decoder) f64(a string) float64 {
	raw := getNum(d.m, a)
	if raw == "" {
		return 0
	}
	v, err := strconv.ParseFloat(raw, 64)
	if err != nil {
		d.fail(a, raw, err)
	}
	return v
}

func (d *decoder) t(a string) time.Time {
	raw := getS(d.m, a)
	if raw == "" {
		return time.Time{}
	}
	t, err := time.Parse(time.RFC3339Nano, raw)
	if err != nil {
		d.fail(a, raw, err)
	}
	return t
}

func (d *decoder) belief(a string) priority.Belief {
	raw := getB(d.m, a)
	b, err := priority.BeliefFromBytes(raw)
	if err != nil {
		d.fail(a, fmt.Sprintf("%x", raw), err)
	}
	return b
}
