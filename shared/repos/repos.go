// Package repos is the one way a repo is added, whoever adds it (the API, a bulk add
// from the CLI through it, the list sync): the URL checks, the repo's identity (its id
// is its mirror path's) and the create, with the refusals named as the domain knows
// them. Transports (HTTP in shared/api) map the refusals to their own errors.
package repos

import (
	"context"
	"errors"
	"fmt"
	"net/url"
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

// ID is the id a URL's repo is stored under once normalized by Check: the hash of its
// mirror path (store.RepoID), with the path in lower case on a host whose paths are
// case-insensitive (urlpolicy.Policy.PathCaseInsensitive), so that Org/Repo and
// org/repo there are one repo. The mirror keeps the path as first added.
//
// Repos stored before ids were folded keep their ids (nothing is moved or renamed):
// one whose path has upper case on such a host is found under the id of its own
// spelling, which IDs lists second.
func ID(p urlpolicy.Policy, norm string) string {
	if folded, ok := foldPath(p, norm); ok {
		return store.RepoID(folded)
	}
	return store.RepoID(norm)
}

// IDs are the ids a repo at norm may be stored under: ID, then, where it differs,
// the id of the path as spelled (a repo stored before ids were folded).
func IDs(p urlpolicy.Policy, norm string) []string {
	id, spelled := ID(p, norm), store.RepoID(norm)
	if id == spelled {
		return []string{id}
	}
	return []string{id, spelled}
}

// SameRepo reports whether two normalized URLs name one repo: equal, or on a host
// whose paths are case-insensitive equal but for the case of their paths.
func SameRepo(p urlpolicy.Policy, a, b string) bool {
	if a == b {
		return true
	}
	fa, ok := foldPath(p, a)
	fb, _ := foldPath(p, b)
	return ok && fa == fb
}

// foldPath is norm with its path in lower case (ASCII letters only: forges fold
// nothing else), when its host's paths are case-insensitive.
func foldPath(p urlpolicy.Policy, norm string) (string, bool) {
	u, err := url.Parse(norm)
	if err != nil || u.Host == "" || !p.PathCaseInsensitive(u.Host) {
		return "", false
	}
	i := strings.Index(norm, "://")
	if i < 0 {
		return "", false
	}
	j := strings.IndexByte(norm[i+3:], '/')
	if j < 0 {
		return norm, true
	}
	j += i + 3
	return norm[:j] + asciiLower(norm[j:]), true
}

func asciiLower(s string) string {
	b := []byte(s)
	for i, c := range b {
		if c >= 'A' && c <= 'Z' {
			b[i] = c + 'a' - 'A'
		}
	}
	return string(b)
}

// Getter reads a repo by id.
type Getter interface {
	GetRepo(ctx context.Context, id string) (store.Repo, error)
}

// Find reads the repo a normalized URL names, under any of its IDs: store.ErrNotFound
// when none is stored.
func Find(ctx context.Context, st Getter, p urlpolicy.Policy, norm string) (store.Repo, error) {
	for _, id := range IDs(p, norm) {
		r, err := st.GetRepo(ctx, id)
		if err == nil || !errors.Is(err, store.ErrNotFound) {
			return r, err
		}
	}
	return store.Repo{}, store.ErrNotFound
}

// Creator is the store methods Add needs: the stores have them; the list sync passes
// a create fenced by its term.
type Creator interface {
	Getter
	CreateRepo(ctx context.Context, r store.Repo) (store.Repo, bool, error)
}

// Result is the outcome of Add.
type Result struct {
	Repo    store.Repo // the stored repo, new or existing; zero when Err is set
	Created bool
	Err     error // an *Error for a refusal; any other error is the store's
}

// Add checks raw and stores it as a new pending repo from src, created at now, unless
// a repo with its id exists (adding is idempotent: on a host whose paths are
// case-insensitive, whatever the case it is named in; the existing repo keeps its
// URL). Only Check's output ever reaches the store.
func Add(ctx context.Context, st Creator, p urlpolicy.Policy, raw string, src store.Source, now time.Time) Result {
	norm, err := Check(p, raw)
	if err != nil {
		return Result{Err: err}
	}
	// Fetched as given: Check passed raw, so Upstream does (the same checks).
	upstream, err := p.Upstream(raw)
	if err != nil {
		return Result{Err: fmt.Errorf("upstream of %s: %w", norm, err)}
	}
	if upstream == norm {
		upstream = ""
	}
	ids := IDs(p, norm)
	var repo store.Repo
	found, created := false, false
	if len(ids) > 1 {
		// A repo stored under the id of this spelling, before ids were folded, is
		// this one: its mirror is at this very path.
		r, err := st.GetRepo(ctx, ids[1])
		switch {
		case err == nil:
			repo, found = r, true
		case !errors.Is(err, store.ErrNotFound):
			return Result{Err: fmt.Errorf("read repo %s: %w", ids[1], err)}
		}
	}
	if !found {
		repo, created, err = st.CreateRepo(ctx, store.Repo{
			ID: ids[0], URL: norm, Upstream: upstream, Source: src, State: store.RepoPending, CreatedAt: now,
		})
		if err != nil {
			return Result{Err: fmt.Errorf("create repo %s: %w", norm, err)}
		}
	}
	if !created && !SameRepo(p, repo.URL, norm) {
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
