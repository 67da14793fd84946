package sim

import (
	"context"
	"errors"
	"sync"

	"github.com/mirrorfleet/mirrorfleet/internal/testkit/storetest"
	"github.com/mirrorfleet/mirrorfleet/shared/store"
)

// ErrInjected is the failure CountingStore injects to simulate a crash mid-tick.
var ErrInjected = errors.New("injected failure")

// CountingStore wraps a Store, counts its writes by kind and can fail a chosen Apply.
type CountingStore struct {
	storetest.Store
	mu     sync.Mutex
	writes map[string]int
	gen    uint64
	// failApplyAt > 0 makes the n-th Apply from now fail without writing.
	failApplyAt int
	injected    int
}

// Injected is how many Applies FailApplyAt has failed.
func (c *CountingStore) Injected() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.injected
}

// NewCountingStore wraps s.
func NewCountingStore(s storetest.Store) *CountingStore {
	return &CountingStore{Store: s, writes: map[string]int{}}
}

func (c *CountingStore) count(kind string) {
	c.mu.Lock()
	c.writes[kind]++
	if kind != "ReportFetch" && kind != "Heartbeat" && kind != "CASElection" {
		c.gen++
	}
	c.mu.Unlock()
}

// Generation changes whenever a write that can change a repo's owner, epoch, state of
// decision or existence went through (everything but fetch reports, heartbeats and
// elections), so readers may cache ownership between changes.
func (c *CountingStore) Generation() uint64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.gen
}

// Writes returns a copy of the write counts by method.
func (c *CountingStore) Writes() map[string]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := map[string]int{}
	for k, v := range c.writes {
		out[k] = v
	}
	return out
}

// FailApplyAt makes the n-th Apply from now fail (n ≥ 1) as a crash would.
func (c *CountingStore) FailApplyAt(n int) {
	c.mu.Lock()
	c.failApplyAt = n
	c.mu.Unlock()
}

// Apply counts and forwards, or fails when a failure is armed.
func (c *CountingStore) Apply(ctx context.Context, term int64, muts []store.Mutation) error {
	c.mu.Lock()
	if c.failApplyAt > 0 {
		c.failApplyAt--
		if c.failApplyAt == 0 {
			c.injected++
			c.mu.Unlock()
			return ErrInjected
		}
	}
	c.mu.Unlock()
	c.count("Apply")
	return c.Store.Apply(ctx, term, muts)
}

// CASElection counts and forwards.
func (c *CountingStore) CASElection(ctx context.Context, v int64, e store.Election) (store.Election, error) {
	c.count("CASElection")
	return c.Store.CASElection(ctx, v, e)
}

// ClaimSlot counts and forwards.
func (c *CountingStore) ClaimSlot(ctx context.Context, w store.Worker, max int) (store.Worker, error) {
	c.count("ClaimSlot")
	return c.Store.ClaimSlot(ctx, w, max)
}

// Heartbeat counts and forwards.
func (c *CountingStore) Heartbeat(ctx context.Context, id string, hb store.Heartbeat) (store.Worker, error) {
	c.count("Heartbeat")
	return c.Store.Heartbeat(ctx, id, hb)
}

// Leave counts and forwards.
func (c *CountingStore) Leave(ctx context.Context, id string) error {
	c.count("Leave")
	return c.Store.Leave(ctx, id)
}

// CreateRepo counts and forwards.
func (c *CountingStore) CreateRepo(ctx context.Context, r store.Repo) (store.Repo, bool, error) {
	c.count("CreateRepo")
	return c.Store.CreateRepo(ctx, r)
}

// RequestDelete counts and forwards.
func (c *CountingStore) RequestDelete(ctx context.Context, id string) error {
	c.count("RequestDelete")
	return c.Store.RequestDelete(ctx, id)
}

// RequestSync counts and forwards.
func (c *CountingStore) RequestSync(ctx context.Context, id string) error {
	c.count("RequestSync")
	return c.Store.RequestSync(ctx, id)
}

// ReportFetch counts and forwards.
func (c *CountingStore) ReportFetch(ctx context.Context, id, owner string, epoch int64, rep store.FetchReport) error {
	c.count("ReportFetch")
	return c.Store.ReportFetch(ctx, id, owner, epoch, rep)
}

// HandBack counts and forwards.
func (c *CountingStore) HandBack(ctx context.Context, id, owner string, epoch int64, reason string) error {
	c.count("HandBack")
	return c.Store.HandBack(ctx, id, owner, epoch, reason)
}

// nodeStore is one worker process's handle on the store: once the process is killed,
// nothing it still does reaches the store (it is dead; its goroutine just has not
// noticed).
type nodeStore struct {
	*CountingStore
	dead bool
}

// errDead is what a killed process's store calls return.
var errDead = errors.New("process killed")

func (n *nodeStore) ClaimSlot(ctx context.Context, w store.Worker, max int) (store.Worker, error) {
	if n.dead {
		return store.Worker{}, errDead
	}
	return n.CountingStore.ClaimSlot(ctx, w, max)
}

func (n *nodeStore) Heartbeat(ctx context.Context, id string, hb store.Heartbeat) (store.Worker, error) {
	if n.dead {
		return store.Worker{}, errDead
	}
	return n.CountingStore.Heartbeat(ctx, id, hb)
}

func (n *nodeStore) Leave(ctx context.Context, id string) error {
	if n.dead {
		return errDead
	}
	return n.CountingStore.Leave(ctx, id)
}

func (n *nodeStore) ReportFetch(ctx context.Context, id, owner string, epoch int64, rep store.FetchReport) error {
	if n.dead {
		return errDead
	}
	return n.CountingStore.ReportFetch(ctx, id, owner, epoch, rep)
}

func (n *nodeStore) HandBack(ctx context.Context, id, owner string, epoch int64, reason string) error {
	if n.dead {
		return errDead
	}
	return n.CountingStore.HandBack(ctx, id, owner, epoch, reason)
}
