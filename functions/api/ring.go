package main

import (
	"context"
	"log/slog"
	"time"

	"github.com/mirrorfleet/mirrorfleet/shared/store"
)

// RingStore is what a Ringer needs: the repo's owner and the owner's signal item.
type RingStore interface {
	GetRepo(ctx context.Context, id string) (store.Repo, error)
	AddSignals(ctx context.Context, worker string, sig store.Signals) error
}

// ringTimeout bounds a ring: it is a hint, and the answer to the forge waits for it.
const ringTimeout = 2 * time.Second

// Ringer is the fast path of a hook or a sync on AWS (ADR 21): the API cannot reach the
// worker, so it adds the repo to the signal item of the repo's owner, which the worker
// reads every second. The durable RequestSync has been made before it; a repo without
// an owner (pending, moving) is left to that, as is any failure here.
type Ringer struct {
	Store RingStore
	Log   *slog.Logger
}

// Hook rings the owner of repo id for a forge's push; ownerLevel when the forge marked
// the hook as set on the repo's owner (worker.AskOwnerHook).
func (r Ringer) Hook(ctx context.Context, id string, ownerLevel bool) {
	if ownerLevel {
		r.ring(ctx, id, store.Signals{OwnerHook: []string{id}})
		return
	}
	r.ring(ctx, id, store.Signals{Hook: []string{id}})
}

// Sync rings the owner of repo id for a user's sync request.
func (r Ringer) Sync(ctx context.Context, id string) {
	r.ring(ctx, id, store.Signals{Sync: []string{id}})
}

func (r Ringer) ring(ctx context.Context, id string, sig store.Signals) {
	ctx, cancel := context.WithTimeout(ctx, ringTimeout)
	defer cancel()
	repo, err := r.Store.GetRepo(ctx, id)
	if err != nil {
		r.log().Warn("ring: read the repo", "repo", id, "err", err)
		return
	}
	if repo.Owner == "" {
		return
	}
	if err := r.Store.AddSignals(ctx, repo.Owner, sig); err != nil {
		r.log().Warn("ring: signal the owner", "repo", id, "owner", repo.Owner, "err", err)
		return
	}
	r.log().Debug("rang", "repo", id, "owner", repo.Owner)
}

func (r Ringer) log() *slog.Logger {
	if r.Log == nil {
		return slog.New(slog.DiscardHandler)
	}
	return r.Log
}
