// Package repos is the one way a repo is added, whoever adds it (the API, a bulk add
// from the CLI through it, the list sync): the URL checks, the repo's identity (its id
// is its mirror path's) and the create, with the refusals named as the domain knows
// them. Transports (HTTP in shared/api) map the refusals to their own errors.
package repos

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"time"

	"github.com/mirrorfleet/mirrorfleet/shared/mirrorpath"
	"github.com/mirrorfleet/mirrorfleet/shared/store"
	"github.com/mirrorfleet/mirrorfleet/shared/urlpolicy"
)

// Kind is why an add was refused.
type Kind string

const (
	InvalidURL     Kind = "invalid_url"       // the URL policy refuses it, or it has no mirror path
	MirrorPathTake Kind = "mirror_path_taken" // another URL already mirrors into its directory
	BeingDeleted   Kind = "being_deleted"     // the repo is being deleted; add it again once gone
)

// Error is a refused add. Message is meant for people as is.
type Error struct {
	Kind    Kind
	Reason  urlpolicy.Reason // InvalidURL: the policy's reason
	Message string
	// Existing is the stored repo that holds the mirror path (MirrorPathTake).
	Existing *store.Repo
}

func (e *Error) Error() string { return e.Message }

// Check applies the URL policy to raw as every way of adding a repo must: it returns
// the normalized URL, or an InvalidURL *Error saying why it cannot be mirrored. The
// git:// rule is the policy's own (urlpolicy).
func Check(p urlpolicy.Policy, raw string) (string, error) {
	norm, err := p.Normalize(raw)
	if err != nil {
		e := &Error{Kind: InvalidURL, Message: err.Error(), Reason: urlpolicy.ReasonMalformed}
		var pe *urlpolicy.Error
		if errors.As(err, &pe) {
			e.Reason = pe.Reason
		}
		return "", e
	}
	if _, err := mirrorpath.Rel(norm); err != nil {
		reason := urlpolicy.ReasonMalformed
		if !strings.HasPrefix(norm, "https://") && !strings.HasPrefix(norm, "http://") {
			reason = urlpolicy.ReasonScheme
		}
		return "", &Error{Kind: InvalidURL, Reason: reason,
			Message: fmt.Sprintf("url %q cannot be mirrored: %v", raw, errors.Unwrap(err))}
	}
	return norm, nil
}

// ID is the id a URL's repo is stored under once normalized by Check.
func ID(norm string) string { return store.RepoID(norm) }

// Creator is the store method Add needs: store.Store has it; the list sync passes
// a create fenced by its term.
type Creator interface {
	CreateRepo(ctx context.Context, r store.Repo) (store.Repo, bool, error)
}

// Result is the outcome of Add.
type Result struct {
	Repo    store.Repo // the stored repo, new or existing; zero when Err is set
	Created bool
	Err     error // an *Error for a refusal; any other error is the store's
}

// Add checks raw and stores it as a new pending repo from src, created at now, unless
// a repo with its id exists (adding is idempotent). Only Check's output ever reaches
// the store.
func Add(ctx context.Context, st Creator, p urlpolicy.Policy, raw string, src store.Source, now time.Time) Result {
	norm, err := Check(p, raw)
	if err != nil {
		return Result{Err: err}
	}
	repo, created, err := st.CreateRepo(ctx, store.Repo{
		ID: ID(norm), URL: norm, Source: src, State: store.RepoPending, CreatedAt: now,
	})
	if err != nil {
		return Result{Err: fmt.Errorf("create repo %s: %w", norm, err)}
	}
	if !created && repo.URL != norm {
		// The id is the mirror path's: another URL already mirrors into that directory
		// (a record stored under an older normalization, say).
		rel, _ := mirrorpath.Rel(norm)
		return Result{Err: &Error{Kind: MirrorPathTake, Existing: &repo,
			Message: fmt.Sprintf("url %q would be mirrored in %s, which belongs to repo %s (%s); two repos never share a mirror directory: use that repo, or delete it first",
				norm, filepath.ToSlash(rel), repo.ID, repo.URL)}}
	}
	if !created && repo.State == store.RepoDeleting {
		return Result{Err: &Error{Kind: BeingDeleted,
			Message: fmt.Sprintf("repo %s (%s) is being deleted; add it again once the delete completes", repo.ID, repo.URL)}}
	}
	return Result{Repo: repo, Created: created}
}
