package dynamo

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/mirrorfleet/mirrorfleet/shared/store"
)

// Key attributes, index names and index key attributes (docs/store-dynamodb.md).
const (
	attrPK = "pk"
	attrSK = "sk"

	// by_owner_pos: the repos of one owner, by ring position (Repo.RingPos, 16 hex
	// digits), so an arc of the ring is a range. Set only while the repo has an owner.
	indexByOwner = "by_owner_pos"
	attrOwnerKey = "g_owner"
	attrPosKey   = "g_pos"
	// needs_decision: the repos for which Repo.NeedsDecision holds, by id (sparse), in
	// two partitions by Repo.Need.
	indexNeeds  = "needs_decision"
	attrNeedKey = "g_need"
	// by_id: every repo, by id (ListRepos).
	indexByID  = "by_id"
	attrAllKey = "g_all"
	// stalest: repos not being deleted, by last success then id, in staleShards partitions.
	indexStalest  = "stalest"
	attrStaleKey  = "g_stale"
	attrStaleSort = "g_stale_sk"

	attrRepoID = "id" // sort key of needs_decision and by_id

	// attrTTL holds the epoch second after which DynamoDB may delete an outbox entry.
	attrTTL = "expire_at"
)

// Partition and sort keys of each kind of item.
const (
	pkElection = "ELECTION"
	pkRing     = "RING"
	skRingHead = "HEAD"
	pkListSync = "LISTSYNC"
	pkSweep    = "SWEEP"
	pkWorkersV = "WORKERSVERSION"
	pkWorkers  = "WORKERS"
	pkSlots    = "SLOTS"
	pkCounts   = "COUNTS"
	skSingle   = "#"
	pkRepoPre  = "REPO#"
	pkOutPre   = "OUTBOX#"
	skChunkPre = "CHUNK#"

	needAction = "N" // g_need of store.NeedAction
	needOwner  = "P" // g_need of store.NeedOwner
	allValue   = "R"
)

func key(pk, sk string) item { return item{attrPK: avS(pk), attrSK: avS(sk)} }

func electionKey() item         { return key(pkElection, skSingle) }
func ringHeadKey() item         { return key(pkRing, skRingHead) }
func listSyncKey() item         { return key(pkListSync, skSingle) }
func sweepKey() item            { return key(pkSweep, skSingle) }
func workersVersionKey() item   { return key(pkWorkersV, skSingle) }
func workerKey(id string) item  { return key(pkWorkers, id) }
func slotKey(slot int) item     { return key(pkSlots, fmt.Sprintf("%010d", slot)) }
func repoKey(id string) item    { return key(pkRepoPre+id, skSingle) }
func counterKey(shard int) item { return key(pkCounts, fmt.Sprintf("%02d", shard)) }

// outboxPK is the partition of one worker registration's outbox. The incarnation has a
// fixed length and comes first, so no worker id can make two partitions collide.
func outboxPK(worker, inc string) string { return pkOutPre + inc + "#" + worker }

func seqSK(seq uint64) string { return fmt.Sprintf("%020d", seq) }

func keyString(k item) string { return getS(k, attrPK) + "\x00" + getS(k, attrSK) }

// posKey is the by_owner_pos sort key of a ring position: fixed-width hex, so string
// order is position order.
func posKey(pos uint64) string { return fmt.Sprintf("%016x", pos) }

// needValue is the needs_decision partition of need.
func needValue(need store.Need) string {
	if need == store.NeedOwner {
		return needOwner
	}
	return needAction
}

// CreateTable creates the table (on-demand billing, the four keys-only indexes), waits
// until it and its indexes are ACTIVE, and enables TTL on the outbox entries' expiry
// attribute. For tests and the local tier; on AWS the CDK stack creates the same table.
func (s *Store) CreateTable(ctx context.Context) error {
	sAttr := func(name string) types.AttributeDefinition {
		return types.AttributeDefinition{AttributeName: aws.String(name), AttributeType: types.ScalarAttributeTypeS}
	}
	keys := func(hash, rng string) []types.KeySchemaElement {
		return []types.KeySchemaElement{
			{AttributeName: aws.String(hash), KeyType: types.KeyTypeHash},
			{AttributeName: aws.String(rng), KeyType: types.KeyTypeRange},
		}
	}
	gsi := func(name, hash, rng string) types.GlobalSecondaryIndex {
		return types.GlobalSecondaryIndex{
			IndexName:  aws.String(name),
			KeySchema:  keys(hash, rng),
			Projection: &types.Projection{ProjectionType: types.ProjectionTypeKeysOnly},
		}
	}
	_, err := s.db.CreateTable(ctx, &dynamodb.CreateTableInput{
		TableName:   aws.String(s.table),
		BillingMode: types.BillingModePayPerRequest,
		AttributeDefinitions: []types.AttributeDefinition{
			sAttr(attrPK), sAttr(attrSK), sAttr(attrRepoID), sAttr(attrOwnerKey), sAttr(attrPosKey), sAttr(attrNeedKey),
			sAttr(attrAllKey), sAttr(attrStaleKey), sAttr(attrStaleSort),
		},
		KeySchema: keys(attrPK, attrSK),
		GlobalSecondaryIndexes: []types.GlobalSecondaryIndex{
			gsi(indexByOwner, attrOwnerKey, attrPosKey),
			gsi(indexNeeds, attrNeedKey, attrRepoID),
			gsi(indexByID, attrAllKey, attrRepoID),
			gsi(indexStalest, attrStaleKey, attrStaleSort),
		},
	})
	// The SDK retries a create whose answer was lost in transit (a reset connection);
	// the repeat then finds the table the first attempt made. Such a table is made
	// ready like a new one.
	var inUse *types.ResourceInUseException
	existed := errors.As(err, &inUse)
	if err != nil && !existed {
		return fmt.Errorf("dynamo: create table %s: %w", s.table, err)
	}
	if err := s.WaitActive(ctx, 5*time.Minute); err != nil {
		return err
	}
	if existed {
		ttl, err := s.db.DescribeTimeToLive(ctx, &dynamodb.DescribeTimeToLiveInput{TableName: aws.String(s.table)})
		if err != nil {
			return fmt.Errorf("dynamo: TTL of %s: %w", s.table, err)
		}
		if d := ttl.TimeToLiveDescription; d != nil && (d.TimeToLiveStatus == types.TimeToLiveStatusEnabled ||
			d.TimeToLiveStatus == types.TimeToLiveStatusEnabling) {
			return nil
		}
	}
	_, err = s.db.UpdateTimeToLive(ctx, &dynamodb.UpdateTimeToLiveInput{
		TableName: aws.String(s.table),
		TimeToLiveSpecification: &types.TimeToLiveSpecification{
			AttributeName: aws.String(attrTTL),
			Enabled:       aws.Bool(true),
		},
	})
	if err != nil {
		return fmt.Errorf("dynamo: enable TTL on %s: %w", s.table, err)
	}
	return nil
}

// WaitActive polls DescribeTable until the table and all its indexes are ACTIVE, for at
// most maxWait.
func (s *Store) WaitActive(ctx context.Context, maxWait time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, maxWait)
	defer cancel()
	for attempt := 0; ; attempt++ {
		out, err := s.db.DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(s.table)})
		var notFound *types.ResourceNotFoundException
		switch {
		case errors.As(err, &notFound):
			// Just created: DescribeTable may not see it yet.
		case err != nil:
			return fmt.Errorf("dynamo: describe table %s: %w", s.table, err)
		case tableActive(out.Table):
			return nil
		}
		if err := backoff(ctx, min(attempt, 4)+3); err != nil {
			return fmt.Errorf("dynamo: table %s not ACTIVE after %s: %w", s.table, maxWait, err)
		}
	}
}

func tableActive(t *types.TableDescription) bool {
	if t == nil || t.TableStatus != types.TableStatusActive {
		return false
	}
	for _, g := range t.GlobalSecondaryIndexes {
		if g.IndexStatus != "" && g.IndexStatus != types.IndexStatusActive {
			return false
		}
	}
	return true
}

// DeleteTable deletes the table (tests clean up with it).
func (s *Store) DeleteTable(ctx context.Context) error {
	_, err := s.db.DeleteTable(ctx, &dynamodb.DeleteTableInput{TableName: aws.String(s.table)})
	if err != nil {
		return fmt.Errorf("dynamo: delete table %s: %w", s.table, err)
	}
	return nil
}
