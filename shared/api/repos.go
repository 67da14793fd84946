package api

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/mirrorfleet/mirrorfleet/shared/repos"
	gitfront "github.com/mirrorfleet/mirrorfleet/shared/serve"
	"github.com/mirrorfleet/mirrorfleet/shared/store"
	"github.com/mirrorfleet/mirrorfleet/shared/urlpolicy"
)

// Repo is a repo as the API shows it (GET /v1/repos/{id}, each of GET /v1/repos; the
// CLI decodes the same type). Every field is always present; times that never happened
// and the owner of an unassigned repo are null (documented in openapi.yaml), so clients
// need no "missing vs zero" logic.
type Repo struct {
	ID  string `json:"id"`
	URL string `json:"url"`
	// Upstream is the URL the repo is fetched from: the one it was added with.
	Upstream      string          `json:"upstream"`
	Source        store.Source    `json:"source"`
	State         store.RepoState `json:"state"`
	Owner         *string         `json:"owner"`
	OwnerEpoch    int64           `json:"owner_epoch"`
	Salt          int             `json:"salt"`
	Priority      float64         `json:"priority"`
	SyncRequested bool            `json:"sync_requested"`
	CreatedAt     *time.Time      `json:"created_at"`
	LastFetchAt   *time.Time      `json:"last_fetch_at"`
	// LastCheckedAt is the last poll of the upstream, whether it found anything new or
	// not; LastFetchAt is the last one written to the store (no-change polls are
	// written only every few hours).
	LastCheckedAt *time.Time `json:"last_checked_at"`
	LastSuccessAt *time.Time `json:"last_success_at"`
	LastChangeAt  *time.Time `json:"last_change_at"`
	LastCommitAt  *time.Time `json:"last_commit_at"`
	FetchFailCnt  int        `json:"fetch_fail_cnt"`
	CloneFailCnt  int        `json:"clone_fail_cnt"`
	SizeBytes     int64      `json:"size_bytes"`
	LastError     string     `json:"last_error"`
	// CloneURL is where git clones the mirror from; null where the server has no
	// clone base URL configured.
	CloneURL *string `json:"clone_url"`
	// NextPollAt is its worker's estimate of the next fetch (GET /v1/repos/{id} only);
	// null where the server cannot ask the worker.
	NextPollAt *time.Time `json:"next_poll_at,omitempty"`
	// PollStretch is the factor its worker puts on its poll step: 1, or more while
	// hooks or a feed cover it (GET /v1/repos/{id} only). Where the worker is in process
	// it is the worker's now; elsewhere (AWS) the one at the repo's last written fetch
	// report; absent before the repo's first fetch.
	PollStretch *float64 `json:"poll_stretch,omitempty"`
}

func (s *server) toRepoJSON(r store.Repo, sc *schedule) Repo {
	return Repo{CloneURL: s.cloneURL(r.URL),
		ID: r.ID, URL: r.URL, Upstream: r.FetchURL(), Source: r.Source, State: r.State, Owner: optString(r.Owner),
		OwnerEpoch: r.OwnerEpoch, Salt: r.Salt, Priority: r.Priority, SyncRequested: r.SyncRequested,
		CreatedAt: optTime(r.CreatedAt), LastFetchAt: optTime(r.LastFetchAt), LastSuccessAt: optTime(r.LastSuccessAt),
		LastChangeAt: optTime(r.LastChangeAt), LastCommitAt: optTime(r.LastCommitAt),
		FetchFailCnt: r.FetchFailCnt, CloneFailCnt: r.CloneFailCnt, SizeBytes: r.SizeBytes, LastError: r.LastError,
		LastCheckedAt: optTime(sc.LastChecked(r)),
	}
}

// cloneURL is the clone URL of a repo, or nil without a clone base URL (or for a URL
// the mirror path cannot map, which the URL policy never stores).
func (s *server) cloneURL(repoURL string) *string {
	if s.cfg.CloneBaseURL == "" {
		return nil
	}
	u, err := gitfront.CloneURL(s.cfg.CloneBaseURL, repoURL)
	if err != nil {
		return nil
	}
	return &u
}

// optTime is nil for the zero time and the time in UTC otherwise, so every timestamp the
// API prints has one form.
func optTime(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	u := t.UTC()
	return &u
}

func optString(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

var repoStates = []store.RepoState{
	store.RepoPending, store.RepoCloning, store.RepoOK, store.RepoFailing,
	store.RepoGone, store.RepoOverflow, store.RepoDeleting,
}

const (
	defaultListLimit = 100
	maxListLimit     = 1000
	// storePage is the page read from the store while filtering by state.
	storePage = 1000
	// scanBudget bounds the repos one filtered listing reads; past it the response
	// carries what it found and a cursor, so a rare state cannot make one request scan
	// the whole table.
	scanBudget = 20 * storePage
	maxCursor  = 1024
)

func (s *server) listRepos(w http.ResponseWriter, r *http.Request) error {
	q, err := parseQuery(r)
	if err != nil {
		return err
	}
	limit := defaultListLimit
	if v := q.Get("limit"); v != "" || q.Has("limit") {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > maxListLimit {
			e := badRequest("invalid_parameter", "limit %q is not an integer from 1 to %d", v, maxListLimit)
			e.Field = "limit"
			return e
		}
		limit = n
	}
	cursor := q.Get("cursor")
	if len(cursor) > maxCursor || strings.ContainsRune(cursor, 0) {
		e := badRequest("invalid_parameter", "cursor is not one this API returned; pass next_cursor from the previous page")
		e.Field = "cursor"
		return e
	}
	var state store.RepoState
	if v := q.Get("state"); v != "" {
		state = store.RepoState(v)
		if !slices.Contains(repoStates, state) {
			e := badRequest("invalid_parameter", "state %q is not a repo state; one of: %s", v, joinStates())
			e.Field = "state"
			return e
		}
	}

	var repos []store.Repo
	var next string
	if state == "" {
		repos, next, err = s.cfg.Store.ListRepos(r.Context(), cursor, limit)
	} else {
		repos, next, err = s.listMatching(r.Context(), cursor, limit, func(rp store.Repo) bool { return rp.State == state })
	}
	if err != nil {
		return fmt.Errorf("list repos: %w", err)
	}
	sc, err := s.schedule(r.Context(), nil)
	if err != nil {
		return err
	}
	out := make([]Repo, 0, len(repos))
	for _, rp := range repos {
		out = append(out, s.toRepoJSON(rp, sc))
	}
	writeJSON(w, http.StatusOK, RepoList{Repos: out, NextCursor: next})
	return nil
}

// listMatching pages through the store keeping the repos match accepts (a state, a
// search), reading at most scanBudget repos. The store's cursor is opaque, so a page is never cut in the middle by hand: when a page holds more matches
// than wanted, the same page is re-read with a limit that ends at the last wanted match,
// and the store hands back the right cursor.
func (s *server) listMatching(ctx context.Context, cursor string, limit int, match func(store.Repo) bool) ([]store.Repo, string, error) {
	var out []store.Repo
	for scanned := 0; ; {
		page, next, err := s.cfg.Store.ListRepos(ctx, cursor, storePage)
		if err != nil {
			return nil, "", err
		}
		scanned += len(page)
		cut := -1 // index in page of the last match that fits
		for i, rp := range page {
			if !match(rp) {
				continue
			}
			if len(out) == limit {
				break
			}
			out = append(out, rp)
			cut = i
		}
		if len(out) == limit && cut >= 0 && cut < len(page)-1 {
			// Re-read up to the cut to get a cursor there. Repos written in between may
			// shift the page, so the matches are taken from the re-read.
			out = out[:len(out)-countMatching(page[:cut+1], match)]
			page, next, err = s.cfg.Store.ListRepos(ctx, cursor, cut+1)
			if err != nil {
				return nil, "", err
			}
			for _, rp := range page {
				if match(rp) && len(out) < limit {
					out = append(out, rp)
				}
			}
			return out, next, nil
		}
		if next == "" || len(out) == limit || scanned >= scanBudget {
			return out, next, nil
		}
		cursor = next
	}
}

func countMatching(rs []store.Repo, match func(store.Repo) bool) int {
	n := 0
	for _, r := range rs {
		if match(r) {
			n++
		}
	}
	return n
}

func joinStates() string {
	var ss []string
	for _, st := range repoStates {
		ss = append(ss, string(st))
	}
	return strings.Join(ss, ", ")
}

// createRequest is the body of POST /v1/repos: exactly one of URL and URLs. Pointers
// tell a field that is absent (or null) from one that is empty.
type createRequest struct {
	URL  *string   `json:"url"`
	URLs *[]string `json:"urls"`
}

// RepoList is the answer of GET /v1/repos: a page of repos, and the cursor of the next
// page ("" after the last).
type RepoList struct {
	Repos      []Repo `json:"repos"`
	NextCursor string `json:"next_cursor"`
}

// BulkAdd is the answer of a bulk add (POST /v1/repos with "urls"): one result per URL,
// in order, and their counts by status.
type BulkAdd struct {
	Results []BulkResult `json:"results"`
	Created int          `json:"created"`
	Exists  int          `json:"exists"`
	Errors  int          `json:"errors"`
}

// Accepted is the answer of a delete or sync request: the repo and what was requested.
type Accepted struct {
	ID     string `json:"id"`
	Status string `json:"status"` // deleting | sync_requested
}

// BulkResult is one URL of a bulk add.
type BulkResult struct {
	URL    string `json:"url"`
	ID     string `json:"id,omitempty"`
	Status string `json:"status"` // created | exists | error
	Error  *Error `json:"error,omitempty"`
}

func (s *server) createRepos(w http.ResponseWriter, r *http.Request) error {
	var req createRequest
	if err := decodeBody(w, r, &req); err != nil {
		return err
	}
	switch {
	case req.URL != nil && req.URLs != nil:
		return badRequest("invalid_request", `send either "url" (one repo) or "urls" (a bulk add), not both`)
	case req.URL == nil && req.URLs == nil:
		return badRequest("invalid_request", `request body needs "url" (one repo) or "urls" (a bulk add)`)
	case req.URL != nil:
		repo, created, err := s.create(r, *req.URL)
		if err != nil {
			return err
		}
		status := http.StatusOK
		if created {
			status = http.StatusCreated
			w.Header().Set("Location", "/v1/repos/"+repo.ID)
			s.poke()
		}
		writeJSON(w, status, s.toRepoJSON(repo, nil)) // new or unchanged: the store has it all
		return nil
	}

	urls := *req.URLs
	switch {
	case len(urls) == 0:
		e := badRequest("invalid_request", `"urls" is empty; give at least one URL`)
		e.Field = "urls"
		return e
	case len(urls) > s.cfg.MaxBulk:
		e := badRequest("too_many_urls", `"urls" has %d URLs; the limit per request is %d`, len(urls), s.cfg.MaxBulk)
		e.Field = "urls"
		return e
	}
	results := make([]BulkResult, 0, len(urls))
	counts := map[string]int{"created": 0, "exists": 0, "error": 0}
	for _, raw := range urls {
		res := BulkResult{URL: raw}
		repo, created, err := s.create(r, raw)
		var ae *Error
		switch {
		case errors.As(err, &ae):
			res.Status, res.Error = "error", ae
		case err != nil:
			// A store failure mid-way: the URLs before it are stored; the client retries
			// the whole request, which is idempotent. The coordinator still hears of
			// what was created.
			if counts["created"] > 0 {
				s.poke()
			}
			return fmt.Errorf("bulk add, after %d of %d URLs: %w", len(results), len(urls), err)
		case created:
			res.Status, res.ID = "created", repo.ID
		default:
			res.Status, res.ID = "exists", repo.ID
		}
		counts[res.Status]++
		results = append(results, res)
	}
	if counts["created"] > 0 {
		s.poke()
	}
	writeJSON(w, http.StatusOK, BulkAdd{Results: results, Created: counts["created"], Exists: counts["exists"], Errors: counts["error"]})
	return nil
}

// create adds one repo for the API.
func (s *server) create(r *http.Request, raw string) (store.Repo, bool, error) {
	res := AddRepo(r.Context(), s.cfg.Store, s.cfg.Policy, raw, store.SourceAPI, s.cfg.Clock.Now())
	return res.Repo, res.Created, res.Err
}

// RepoCreator is the store method AddRepo needs.
type RepoCreator = repos.Creator

// AddResult is the outcome of AddRepo.
type AddResult struct {
	Repo    store.Repo // the stored repo, new or existing; zero when Err is set
	Created bool
	// Err is an *Error when the input is refused (invalid_url with the policy's
	// reason, mirror_path_taken, or conflict when the repo is being deleted); any
	// other error is the store's.
	Err error
}

// AddRepo is repos.Add (the one way repos are added) with its refusals as API errors.
func AddRepo(ctx context.Context, st RepoCreator, p urlpolicy.Policy, raw string, src store.Source, now time.Time) AddResult {
	res := repos.Add(ctx, st, p, raw, src, now)
	return AddResult{Repo: res.Repo, Created: res.Created, Err: fromDomain(res.Err)}
}

// CheckURL is repos.Check with its refusal as an API error (400 invalid_url).
func CheckURL(p urlpolicy.Policy, raw string) (string, *Error) {
	norm, err := repos.Check(p, raw)
	if err != nil {
		e, _ := fromDomain(err).(*Error)
		return "", e
	}
	return norm, nil
}

// fromDomain maps a refused add to its API error; other errors pass unchanged.
func fromDomain(err error) error {
	var re *repos.Error
	if !errors.As(err, &re) {
		return err
	}
	switch re.Kind {
	case repos.MirrorPathTake:
		e := &Error{Status: http.StatusConflict, Code: "mirror_path_taken", Message: re.Message}
		if re.Existing != nil {
			e.Existing = &ExistingRepo{ID: re.Existing.ID, URL: re.Existing.URL}
		}
		return e
	case repos.BeingDeleted:
		return &Error{Status: http.StatusConflict, Code: "conflict", Message: re.Message}
	}
	return &Error{Status: http.StatusBadRequest, Code: "invalid_url", Reason: string(re.Reason), Message: re.Message}
}

func (s *server) poke() {
	if s.cfg.Poke != nil {
		s.cfg.Poke()
	}
}

// repoID reads the {id} path value: a repo id, or a repository URL (path-escaped), which
// names the repo its normalized form is stored as (repos.Find: on a host whose paths
// are case-insensitive, in any case), else the id adding it would give.
func (s *server) repoID(r *http.Request) (string, error) {
	id := r.PathValue("id")
	if hexID(id) {
		return id, nil
	}
	if strings.Contains(id, "://") {
		norm, e := CheckURL(s.cfg.Policy, id)
		if e != nil {
			e.Field = "id"
			return "", e
		}
		repo, err := repos.Find(r.Context(), s.cfg.Store, s.cfg.Policy, norm)
		switch {
		case err == nil:
			return repo.ID, nil
		case errors.Is(err, store.ErrNotFound):
			return repos.ID(s.cfg.Policy, norm), nil
		}
		return "", fmt.Errorf("get repo %s: %w", norm, err)
	}
	e := badRequest("invalid_id", "repo %q is neither an id (16 lowercase hex digits, from POST /v1/repos) nor a repository URL", truncate(id, 64))
	e.Field = "id"
	return "", e
}

func truncate(s string, n int) string {
	if len(s) > n {
		return s[:n] + "..."
	}
	return s
}

func notFound(id string) *Error {
	return &Error{Status: http.StatusNotFound, Code: "not_found", Message: fmt.Sprintf("repo %s does not exist", id)}
}

// lookupRepo reads the repo the request's path names: 400 for a malformed id, 404 for an
// unknown one.
func (s *server) lookupRepo(r *http.Request) (string, store.Repo, error) {
	id, err := s.repoID(r)
	if err != nil {
		return "", store.Repo{}, err
	}
	repo, err := s.cfg.Store.GetRepo(r.Context(), id)
	if errors.Is(err, store.ErrNotFound) {
		return id, store.Repo{}, notFound(id)
	}
	if err != nil {
		return id, store.Repo{}, fmt.Errorf("get repo %s: %w", id, err)
	}
	return id, repo, nil
}

func (s *server) getRepo(w http.ResponseWriter, r *http.Request) error {
	_, repo, err := s.lookupRepo(r)
	if err != nil {
		return err
	}
	sc, err := s.schedule(r.Context(), nil)
	if err != nil {
		return err
	}
	out := s.toRepoJSON(repo, sc)
	if at, ok := sc.NextPoll(repo); ok {
		out.NextPollAt = optTime(at)
	}
	out.PollStretch = s.pollStretch(repo)
	writeJSON(w, http.StatusOK, out)
	return nil
}

// pollStretch is the factor on repo's poll step: its worker's now where it is in
// process, else the one its last written fetch report carried.
func (s *server) pollStretch(repo store.Repo) *float64 {
	if s.cfg.PollStretch != nil {
		if f, ok := s.cfg.PollStretch(repo.ID); ok {
			return &f
		}
		return nil
	}
	if repo.LastFetchAt.IsZero() {
		return nil
	}
	f := max(repo.PollStretch, 1)
	return &f
}

func (s *server) deleteRepo(w http.ResponseWriter, r *http.Request) error {
	id, err := s.repoID(r)
	if err != nil {
		return err
	}
	err = s.cfg.Store.RequestDelete(r.Context(), id)
	if errors.Is(err, store.ErrNotFound) {
		return notFound(id)
	}
	if err != nil {
		return fmt.Errorf("request delete of repo %s: %w", id, err)
	}
	s.poke()
	writeJSON(w, http.StatusAccepted, Accepted{ID: id, Status: "deleting"})
	return nil
}

func (s *server) syncRepo(w http.ResponseWriter, r *http.Request) error {
	id, repo, err := s.lookupRepo(r)
	if err != nil {
		return err
	}
	if repo.State == store.RepoDeleting {
		return &Error{Status: http.StatusConflict, Code: "conflict", Message: fmt.Sprintf("repo %s is being deleted; it cannot be synced", id)}
	}
	err = s.cfg.Store.RequestSync(r.Context(), id)
	if errors.Is(err, store.ErrNotFound) {
		return notFound(id) // deleted since the read above
	}
	if err != nil {
		return fmt.Errorf("request sync of repo %s: %w", id, err)
	}
	if s.cfg.Ring != nil {
		s.cfg.Ring(r.Context(), id)
	}
	s.poke()
	writeJSON(w, http.StatusAccepted, Accepted{ID: id, Status: "sync_requested"})
	return nil
}
