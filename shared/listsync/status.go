package listsync

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/mirrorfleet/mirrorfleet/shared/liststatus"
	"github.com/mirrorfleet/mirrorfleet/shared/store"
)

// ViewStore is the part of the store the status and the confirmation need.
type ViewStore interface {
	GetListSync(ctx context.Context) (store.ListSync, error)
	GetElection(ctx context.Context) (store.Election, error)
	Apply(ctx context.Context, term int64, muts []store.Mutation) error
}

// View serves GET /v1/list and POST /v1/list/confirm from the store alone (api.ListSync, which statusServer mirrors),
// for an API that runs apart from the coordinator (the API Lambda). The local fleet
// uses the Syncer, which adds what it knows of its own last attempt.
type View struct {
	Config Config
	Store  ViewStore
}

// statusServer is what the API's ListSync asks of the list sync.
type statusServer interface {
	ListStatus(ctx context.Context) (liststatus.Status, error)
	ConfirmPurge(ctx context.Context, commit string) (liststatus.Status, error)
}

var (
	_ statusServer = View{}
	_ statusServer = (*Syncer)(nil)
)

// ListStatus reports the configuration and the last applied state.
func (v View) ListStatus(ctx context.Context) (liststatus.Status, error) {
	if !v.Config.Enabled() {
		return liststatus.NotConfigured(), nil
	}
	ls, err := v.Store.GetListSync(ctx)
	if err != nil {
		return liststatus.Status{}, fmt.Errorf("read list sync state: %w", err)
	}
	d, err := DecodeDetails(ls)
	if err != nil {
		return liststatus.Status{}, err
	}
	cfg := v.Config.withDefaults()
	st := liststatus.Status{
		Configured: true, Repo: &cfg.Repo, Paths: cfg.Paths,
		IntervalSeconds:       ptr(cfg.Interval.Seconds()),
		PurgeThresholdPercent: ptr(cfg.PurgeThreshold),
		Entries:               d.Entries, BadTotal: d.BadTotal,
		BadLines: []liststatus.BadLine{}, Pending: []string{}, BadByCode: map[string]int{},
	}
	for k, n := range d.BadByCode {
		st.BadByCode[k] = n
	}
	if cfg.Branch != "" {
		b := strings.TrimPrefix(cfg.Branch, "refs/heads/")
		st.Branch = &b
	}
	if ls.Commit != "" {
		st.Commit = &ls.Commit
		at := ls.AppliedAt.UTC()
		st.AppliedAt = &at
		st.LastChange = &liststatus.Change{Mode: d.Mode, Added: d.Added, Removed: d.Removed}
	}
	for _, b := range d.BadLines {
		st.BadLines = append(st.BadLines, liststatus.BadLine(b))
	}
	st.Pending = append(st.Pending, d.Pending...)
	if h := d.Held; h != nil {
		st.HeldPurge = &liststatus.HeldPurge{
			Commit: h.Commit, Remove: h.Remove, Of: h.Of, Percent: h.Percent(), ThresholdPercent: h.Threshold,
			Since: h.Since.UTC(), Sample: append([]string{}, h.Sample...), Confirmed: d.Confirmed == h.Commit,
		}
	}
	st.Message = message(st)
	return st, nil
}

func message(st liststatus.Status) string {
	if st.Commit == nil {
		return "waiting for the first sync of " + *st.Repo
	}
	if h := st.HeldPurge; h != nil {
		if h.Confirmed {
			return fmt.Sprintf("the held purge of commit %s is confirmed; the coordinator applies it at its next sync", short(h.Commit))
		}
		return fmt.Sprintf("purge held: commit %s would remove %d of %d list repos (%.1f%%, threshold %g%%); "+
			"confirm with `mirrorfleet list confirm %s` (POST /v1/list/confirm) or raise --list-purge-threshold",
			short(h.Commit), h.Remove, h.Of, h.Percent, h.ThresholdPercent, h.Commit)
	}
	msg := fmt.Sprintf("in sync with commit %s: %d URLs", short(*st.Commit), st.Entries)
	if st.BadTotal > 0 {
		msg += fmt.Sprintf(", %d bad lines skipped", st.BadTotal)
	}
	if len(st.Pending) > 0 {
		msg += fmt.Sprintf(", %d waiting to be added (a delete to finish, or a mirror path another repo holds: see the bad lines)", len(st.Pending))
	}
	return msg
}

func short(c string) string { return c[:min(len(c), 12)] }

func ptr[T any](v T) *T { return &v }

// confirmTries bounds the retries of a confirmation racing the coordinator's writes.
const confirmTries = 5

// ConfirmPurge records an operator's confirmation of the held purge of commit (a
// prefix will do). The coordinator applies it at its next sync.
//
// The record can only be written through the fenced Apply, and the API holds no term
// of its own: it writes with the current stored term. The write is guarded by the
// record's version, so it never overwrites a sync it did not read; a coordinator whose
// own write then conflicts recomputes at its next tick.
func (v View) ConfirmPurge(ctx context.Context, commit string) (liststatus.Status, error) {
	if !v.Config.Enabled() {
		return liststatus.Status{}, conflict("no list repository is configured, so there is no purge to confirm")
	}
	commit = strings.ToLower(strings.TrimSpace(commit))
	if len(commit) < liststatus.MinCommitPrefix {
		return liststatus.Status{}, &liststatus.Error{Kind: liststatus.Invalid, Field: "commit",
			Message: fmt.Sprintf("commit %q is too short: give at least %d hex digits", commit, liststatus.MinCommitPrefix)}
	}
	for range confirmTries {
		ls, err := v.Store.GetListSync(ctx)
		if err != nil {
			return liststatus.Status{}, fmt.Errorf("read list sync state: %w", err)
		}
		d, err := DecodeDetails(ls)
		if err != nil {
			return liststatus.Status{}, err
		}
		if d.Held == nil {
			return liststatus.Status{}, conflict("no purge is held (the list is at commit %s); nothing to confirm", orNone(short(ls.Commit)))
		}
		if !strings.HasPrefix(d.Held.Commit, commit) {
			return liststatus.Status{}, conflict("the held purge is for commit %s, not %s (a newer commit replaces a held purge; GET /v1/list shows the current one)", d.Held.Commit, commit)
		}
		if d.Confirmed == d.Held.Commit {
			return v.ListStatus(ctx) // confirming twice is harmless
		}
		el, err := v.Store.GetElection(ctx)
		if err != nil {
			return liststatus.Status{}, fmt.Errorf("read election: %w", err)
		}
		d.Confirmed = d.Held.Commit
		extra, err := d.encode()
		if err != nil {
			return liststatus.Status{}, err
		}
		rec := store.ListSync{Commit: ls.Commit, AppliedAt: ls.AppliedAt, Extra: extra}
		err = v.Store.Apply(ctx, el.Term, []store.Mutation{store.PutListSync{ListSync: rec, ExpectVersion: ls.Version}})
		if errors.Is(err, store.ErrConflict) || errors.Is(err, store.ErrFenced) {
			continue // the coordinator wrote (or a new one took over) in between: read again
		}
		if err != nil {
			return liststatus.Status{}, fmt.Errorf("record the confirmation: %w", err)
		}
		return v.ListStatus(ctx)
	}
	return liststatus.Status{}, conflict("the list sync state kept changing while the confirmation was recorded; try again")
}

func conflict(format string, args ...any) *liststatus.Error {
	return liststatus.Conflictf(format, args...)
}

func orNone(s string) string {
	if s == "" {
		return "none yet"
	}
	return s
}

func (s *Syncer) view() View { return View{Config: s.cfg, Store: s.st} }

// ListStatus is View.ListStatus plus this coordinator's own last attempt.
func (s *Syncer) ListStatus(ctx context.Context) (liststatus.Status, error) {
	st, err := s.view().ListStatus(ctx)
	if err != nil {
		return st, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.lastTry.IsZero() {
		t := s.lastTry.UTC()
		st.LastAttemptAt = &t
	}
	if s.lastErr != "" {
		e := s.lastErr
		st.LastError = &e
		st.Message = "the last attempt failed (" + e + "); " + st.Message
	}
	return st, nil
}

// ConfirmPurge is View.ConfirmPurge; the sync then runs at the next tick, not the next
// interval.
func (s *Syncer) ConfirmPurge(ctx context.Context, commit string) (liststatus.Status, error) {
	st, err := s.view().ConfirmPurge(ctx, commit)
	if err == nil {
		s.Nudge()
	}
	return st, err
}
