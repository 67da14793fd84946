package storetest

import (
	"context"

	"github.com/mirrorfleet/mirrorfleet/shared/store"
)

// Store is a store backend whole: every method the fleet's parts use, each with the
// contract Run checks. No part of the fleet uses it whole — each defines the view it
// needs where it uses it (coordinator.Store, election.Store, worker.Store,
// worker.SignalStore, api.Store, api.HookStore, listsync.Store, listsync.ViewStore,
// meter.TickStore, the API Lambda's Store and RingStore) — but a backend implements them
// all, and the suite, the simulator and the benchmarks drive it whole.
//
// Every write that others race on is conditional.
type Store interface {
	// Election. CASElection writes e with Version = expectVersion+1 if the stored version
	// is still expectVersion (0: no record yet), else store.ErrConflict.
	GetElection(ctx context.Context) (store.Election, error)
	CASElection(ctx context.Context, expectVersion int64, e store.Election) (store.Election, error)

	// Apply performs the coordinator's writes atomically, fenced by term: if the stored
	// election term is not term, store.ErrFenced; if any mutation's condition fails, store.ErrConflict.
	// Either way nothing is written. At most store.MaxApplyItems items (store.Mutation.Items) per call.
	// Mutations of one stored item are applied in order (a backend whose transactions take
	// each item once folds them). Any other error may mean the write landed (a timeout
	// after commit): callers must be idempotent, as the coordinator is.
	Apply(ctx context.Context, term int64, muts []store.Mutation) error

	GetRing(ctx context.Context) (store.Ring, error) // zero store.Ring (Version 0) when never written
	// GetRingHead is GetRing without Members and Tokens: what a coordinator reads every
	// tick to learn whether the ring it decoded before is still current.
	GetRingHead(ctx context.Context) (store.Ring, error)

	// Workers. ClaimSlot registers w in the lowest free slot below maxSlots (a conditional
	// write on the slot bitmap) and returns it with Slot set and Beats 1 (registering is
	// the first sign of life); an existing id is store.ErrConflict.
	ClaimSlot(ctx context.Context, w store.Worker, maxSlots int) (store.Worker, error)
	// Heartbeat records hb, adds one to Beats and returns the worker record; store.ErrNotFound
	// once the worker has been removed. It never changes State.
	Heartbeat(ctx context.Context, id string, hb store.Heartbeat) (store.Worker, error)
	// Leave marks a worker draining (a graceful exit); the coordinator moves its repos.
	Leave(ctx context.Context, id string) error
	GetWorker(ctx context.Context, id string) (store.Worker, error)
	ListWorkers(ctx context.Context) ([]store.Worker, error)
	// WorkersVersion is a number that changes with every change of the membership: a
	// worker record created or removed, or its state, slot, registration or recorded
	// silence changed (store.MembershipChanged). Heartbeats, acks and outbox heads and trims
	// do not move it: a reader that saw it unchanged knows ListWorkers would return the
	// same workers in the same states, with only those figures moved. A backend that
	// cannot tell cheaply returns errors.ErrUnsupported.
	WorkersVersion(ctx context.Context) (uint64, error)
	ReadOutbox(ctx context.Context, worker string, after uint64, limit int) ([]store.OutboxEntry, error)

	// Repos. CreateRepo inserts r unless a repo with r.ID exists; it returns the stored repo
	// and whether it was created. r.ID is store.RepoID(r.URL), a function of the mirror path, so
	// the id's uniqueness is the mirror path's: a URL whose path is taken gets the stored
	// repo back, with its own (different) URL.
	CreateRepo(ctx context.Context, r store.Repo) (store.Repo, bool, error)
	// CreateRepoFenced is CreateRepo for the coordinator (the list sync): it writes only
	// while term is the stored election term, else store.ErrFenced and nothing is written.
	CreateRepoFenced(ctx context.Context, term int64, r store.Repo) (store.Repo, bool, error)
	GetRepo(ctx context.Context, id string) (store.Repo, error)
	// ListRepos pages through all repos by id; pass the returned cursor to continue ("" ends).
	ListRepos(ctx context.Context, cursor string, limit int) ([]store.Repo, string, error)
	// Listings by owner, needing a decision and stalest read indexes that may lag behind
	// writes (DynamoDB GSIs): they may miss a repo that just qualified, but never return
	// one that no longer does.
	// ListReposByOwner pages through owner's repos in ring-position order (store.Repo.RingPos).
	ListReposByOwner(ctx context.Context, owner string, cursor string, limit int) ([]store.Repo, string, error)
	// ListReposByOwnerRange is ListReposByOwner limited to the repos whose RingPos lies in
	// [from, to] (from <= to): the repos of one arc of the ring are one range read.
	ListReposByOwnerRange(ctx context.Context, owner string, from, to uint64, cursor string, limit int) ([]store.Repo, string, error)
	// ListReposNeedingDecision pages through the repos for which store.Repo.NeedsDecision holds
	// and store.Repo.Need is need, by id.
	ListReposNeedingDecision(ctx context.Context, need store.Need, cursor string, limit int) ([]store.Repo, string, error)
	// ListStalest returns up to limit repos (limit <= 0: a backend default) ordered by
	// store.CompareStaleness — never-succeeded repos first, the first added first — leaving out
	// repos being deleted. It feeds the status page's "stalest" table; both backends serve
	// it from an index (O(limit)).
	ListStalest(ctx context.Context, limit int) ([]store.Repo, error)
	RequestDelete(ctx context.Context, id string) error
	// RequestDeleteFenced is RequestDelete for the coordinator (the list sync), fenced by
	// term like CreateRepoFenced.
	RequestDeleteFenced(ctx context.Context, term int64, id string) error
	RequestSync(ctx context.Context, id string) error
	// ReportFetch records a fetch outcome if owner/epoch still hold the repo and it is not
	// being deleted, else store.ErrConflict.
	ReportFetch(ctx context.Context, id, owner string, epoch int64, rep store.FetchReport) error
	// HandBack marks an owned repo overflow (the disk guard), fenced like ReportFetch.
	HandBack(ctx context.Context, id, owner string, epoch int64, reason string) error
	CountRepos(ctx context.Context) (map[store.RepoState]int, error)

	// Signals (ADR 21): a worker's hints to fetch repos now, beside the durable
	// RequestSync. AddSignals adds ids to worker's signal sets without any condition
	// (a hint for a worker that is gone is harmless and expires); GetSignals reads them
	// strongly consistently (zero store.Signals when there are none); RemoveSignals takes the
	// given ids out, leaving any added meanwhile.
	AddSignals(ctx context.Context, worker string, sig store.Signals) error
	GetSignals(ctx context.Context, worker string) (store.Signals, error)
	RemoveSignals(ctx context.Context, worker string, sig store.Signals) error

	GetListSync(ctx context.Context) (store.ListSync, error)
	// GetSweep returns the anti-entropy sweep's state (zero before the first write).
	GetSweep(ctx context.Context) (store.Sweep, error)

	Close() error
}
