package coordinator

import (
	"math"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/mirrorfleet/mirrorfleet/internal/testkit/dynamotest"
	"github.com/mirrorfleet/mirrorfleet/shared/store/dynamo"
)

// readUnits sums the read capacity the DynamoDB store reports consuming for repo
// records (its listings' index queries and strongly consistent item reads). A repo item
// is under 4 KB, so a unit is a record read; index entries read and then dropped
// (an index that lags) count too.
type readUnits struct {
	mu    sync.Mutex
	units float64
}

func (r *readUnits) add(op string, cc types.ConsumedCapacity) {
	if !strings.HasPrefix(op, "ListRepos") && !strings.HasPrefix(op, "GetRepo") {
		return
	}
	r.mu.Lock()
	r.units += aws.ToFloat64(cc.CapacityUnits)
	r.mu.Unlock()
}

func (r *readUnits) take() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := int(math.Ceil(r.units))
	r.units = 0
	return n
}

// On DynamoDB Local, by the read capacity the store reports: a join and a death read
// what they move (the owner and position index serves each moved arc as one range),
// and the sweep's slice waits for the next tick.
func TestMembershipTicksReadWhatMovesOnDynamoDB(t *testing.T) {
	if testing.Short() {
		t.Skip("DynamoDB Local round trips: not in -short")
	}
	var units readUnits
	st := dynamotest.Table(t, "coordreads", dynamo.Config{OnConsumed: units.add})
	// 10 workers of 100 repos; an hour's pass over 1,000 repos has about 220 due after a
	// 10-minute gap.
	f := newTickFleetOn(t, st, 10, 1000, Config{SweepPeriod: time.Hour})
	membershipReadsWhatMoves(t, f, 150, units.take)
}
