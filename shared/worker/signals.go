package worker

import (
	"context"
	"fmt"
	"time"

	"github.com/mirrorfleet/mirrorfleet/shared/clock"
	"github.com/mirrorfleet/mirrorfleet/shared/store"
)

// SignalStore is where a worker on AWS finds the asks the API leaves for it (ADR 21):
// the API Lambda cannot reach a worker, so it adds the repo to the owner's signal item
// beside the durable sync request.
type SignalStore interface {
	GetSignals(ctx context.Context, worker string) (store.Signals, error)
	RemoveSignals(ctx context.Context, worker string, sig store.Signals) error
}

// SignalEvery is how often a worker reads its signals: a hook is fetched within about
// this much. An empty read is one strongly consistent GetItem (ADR 21: $0.32 a month).
const SignalEvery = time.Second

// signalTimeout bounds one read and its removal: a slow store delays the next read,
// never piles reads up.
const signalTimeout = 5 * time.Second

// TakeSignals reads the worker's signals once, takes what it read out of the store and
// then asks for a fetch of each repo it owns (FetchNow; a hook's as a hook). A signal
// for a repo it does not own (moved away, or not yet learned) is dropped: the durable
// sync request that went with it reaches the owner through the coordinator. The removal
// comes before the asks, so a push whose signal the removal swallowed (added after the
// read) is older than the ask, and the fetch the ask starts sees it. It returns how
// many repos it asked for and how many it dropped.
func (w *Worker) TakeSignals(ctx context.Context, st SignalStore) (asked, dropped int, err error) {
	id := w.ID()
	if id == "" {
		return 0, 0, nil // not joined yet
	}
	ctx, cancel := context.WithTimeout(ctx, signalTimeout)
	defer cancel()
	sig, err := st.GetSignals(ctx, id)
	if err != nil {
		return 0, 0, fmt.Errorf("read signals: %w", err)
	}
	if sig.Empty() {
		return 0, 0, nil
	}
	// A failed removal still asks: the next read asks again, and asks coalesce.
	if rerr := st.RemoveSignals(ctx, id, sig); rerr != nil {
		err = fmt.Errorf("remove signals: %w", rerr)
	}
	for _, s := range []struct {
		ids []string
		ask Ask
	}{{sig.Hook, AskHook}, {sig.OwnerHook, AskOwnerHook}, {sig.Sync, AskSync}} {
		for _, repo := range s.ids {
			if w.FetchNow(repo, s.ask) {
				asked++
			} else {
				dropped++
			}
		}
	}
	if asked+dropped > 0 {
		w.log.Debug("signals", "asked", asked, "dropped", dropped)
	}
	return asked, dropped, err
}

// RunSignals reads the worker's signals every `every` (SignalEvery when <= 0) until ctx
// ends.
func (w *Worker) RunSignals(ctx context.Context, st SignalStore, every time.Duration) {
	if every <= 0 {
		every = SignalEvery
	}
	clock.Every(ctx, every, nil, func() {
		if _, _, err := w.TakeSignals(ctx, st); err != nil && ctx.Err() == nil {
			w.log.Warn("signals", "err", err)
		}
	})
}
