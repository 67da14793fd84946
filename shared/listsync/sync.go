// Package listsync keeps the repos listed in a git repository mirrored
// (docs/list-sync.md, ADR 7): the coordinator fetches the list repository on an interval, diffs the list
// files between the last applied commit and the new head, adds the new URLs as repos
// with source=list and asks for the removed ones to be deleted — only ever repos the list
// added. A change that would remove more than a threshold of the list's repos is held
// until an operator confirms it (purge protection, as grokmirror's).
//
// The applied commit is recorded last, with a fenced conditional write; everything
// before it is idempotent, so a crash anywhere repeats the change safely.
package listsync

import (
	"cmp"
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-git/go-billy/v5/osfs"
	git "github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/cache"
	"github.com/go-git/go-git/v5/plumbing/object"
	"github.com/go-git/go-git/v5/storage/filesystem"

	"github.com/mirrorfleet/mirrorfleet/shared/clock"
	"github.com/mirrorfleet/mirrorfleet/shared/fetch"
	"github.com/mirrorfleet/mirrorfleet/shared/mirror"
	"github.com/mirrorfleet/mirrorfleet/shared/repos"
	"github.com/mirrorfleet/mirrorfleet/shared/store"
	"github.com/mirrorfleet/mirrorfleet/shared/urlpolicy"
)

// Store is the part of the store the list sync uses. Its adds
// and deletes are the coordinator's writes, fenced by its term like every other: a
// deposed coordinator cannot add or delete from an old list commit.
type Store interface {
	CreateRepoFenced(ctx context.Context, term int64, r store.Repo) (store.Repo, bool, error)
	GetRepo(ctx context.Context, id string) (store.Repo, error)
	ListRepos(ctx context.Context, cursor string, limit int) ([]store.Repo, string, error)
	RequestDeleteFenced(ctx context.Context, term int64, id string) error
	ViewStore
}

// fencedCreator hands repos.Add (the one way repos are added) a create fenced by term.
type fencedCreator struct {
	st   Store
	term int64
}

func (f fencedCreator) CreateRepo(ctx context.Context, r store.Repo) (store.Repo, bool, error) {
	return f.st.CreateRepoFenced(ctx, f.term, r)
}

func (f fencedCreator) GetRepo(ctx context.Context, id string) (store.Repo, error) {
	return f.st.GetRepo(ctx, id)
}

// Options are a Syncer's collaborators.
type Options struct {
	Store Store
	// Policy checks the list repository's URL (and every connection made to fetch it)
	// and every URL in the list, exactly as for repos added through the API.
	Policy urlpolicy.Policy
	Clock  clock.Clock  // default: the wall clock
	Log    *slog.Logger // default: discard
	// OnChange, if set, is called after a sync that added or removed repos (the local
	// fleet pokes its coordinator so they are assigned at once). It must not block.
	OnChange func()
}

const (
	readPage = 1000
	// quickRetries: after the list was fetched, a store failure (a conflict with an
	// operator's confirmation, a crash of the write) is retried at the next tick rather
	// than the next interval, this many times in a row.
	quickRetries = 3
	// writers bounds the adds and deletes in flight at once.
	writers     = 8
	objectCache = 16 << 20
)

// Syncer is the coordinator's list sync (coordinator.ListSyncer). It keeps the clone of
// the list repository in Config.Dir and, in memory, when it last tried; everything else
// it knows is in the store. It is safe for concurrent use.
type Syncer struct {
	cfg      Config
	repoURL  string // normalized
	st       Store
	policy   urlpolicy.Policy
	clock    clock.Clock
	log      *slog.Logger
	onChange func()
	mirror   *mirror.Mirrorer
	target   fetch.Target

	run sync.Mutex // one sync at a time

	mu      sync.Mutex // guards the fields below
	next    time.Time  // no fetch before this, unless nudged
	nudged  bool
	lastTry time.Time
	lastErr string
	retries int
}

// New checks cfg (the repository URL against the URL policy too) and prepares the
// clone directory. It contacts nothing: the first SyncList fetches.
//
// Why a clone on disk (a bare mirror kept by package mirror) rather than go-git's
// memory storage: it fetches only new objects, the last applied commit stays at hand
// for the diff, and an unchanged list costs one ref advertisement — the same code, URL
// policy and locks as every mirror. On Lambda /tmp survives warm invocations; a cold
// start re-clones, and if the old commit is then missing the sync compares in full.
func New(cfg Config, o Options) (*Syncer, error) {
	if !cfg.Enabled() {
		return nil, errors.New("listsync: no list repository configured")
	}
	if o.Store == nil {
		return nil, errors.New("listsync: Options.Store is nil")
	}
	cfg = cfg.withDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	norm, _, reason := normalize(o.Policy, cfg.Repo)
	if reason != "" {
		return nil, fmt.Errorf("list repository: %s", reason)
	}
	// The list is fetched from the URL as configured (".git" kept), as repos are.
	upstream, err := o.Policy.Upstream(cfg.Repo)
	if err != nil || upstream == norm {
		upstream = ""
	}
	paths := make([]string, 0, len(cfg.Paths))
	for _, p := range cfg.Paths {
		c, _ := cleanPath(p) // Validate checked it
		if !slices.Contains(paths, c) {
			paths = append(paths, c)
		}
	}
	cfg.Paths = paths
	cfg.Branch = strings.TrimPrefix(cfg.Branch, "refs/heads/")
	if o.Clock == nil {
		o.Clock = clock.Real{}
	}
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	m, err := mirror.New(mirror.Config{Root: cfg.Dir, Client: o.Policy.HTTPClient(0), Logger: o.Log})
	if err != nil {
		return nil, fmt.Errorf("list clone directory: %w", err)
	}
	return &Syncer{cfg: cfg, repoURL: norm, st: o.Store, policy: o.Policy, clock: o.Clock,
		log: o.Log.With("list", norm), onChange: o.OnChange, mirror: m,
		target: fetch.Target{ID: "list", URL: norm, Upstream: upstream}}, nil
}

// Config returns the configuration in force (defaults applied, paths cleaned).
func (s *Syncer) Config() Config { return s.cfg }

// Close releases the clone directory's background work.
func (s *Syncer) Close() error { return s.mirror.Close() }

// Nudge makes the next SyncList fetch even if the interval has not passed (after an
// operator confirmed a purge, say).
func (s *Syncer) Nudge() {
	s.mu.Lock()
	s.nudged = true
	s.mu.Unlock()
}

// SyncList fetches the list repository, if the interval has passed, and applies what
// changed, writing with term as fencing token. Between intervals it does nothing; with
// an unchanged head it writes nothing.
func (s *Syncer) SyncList(ctx context.Context, term int64) error {
	s.run.Lock()
	defer s.run.Unlock()
	now := s.clock.Now()
	s.mu.Lock()
	if !s.nudged && now.Before(s.next) {
		s.mu.Unlock()
		return nil
	}
	s.nudged, s.next, s.lastTry = false, now.Add(s.cfg.Interval), now
	s.mu.Unlock()

	fetched, err := s.sync(ctx, term, now)

	s.mu.Lock()
	defer s.mu.Unlock()
	if err == nil {
		s.lastErr, s.retries = "", 0
		return nil
	}
	s.lastErr = err.Error()
	if fetched && s.retries < quickRetries && ctx.Err() == nil {
		s.retries++
		s.nudged = true
	}
	return fmt.Errorf("list sync: %w", err)
}

// item is one repo of the list.
type item struct{ id, url string }

// change is what one sync applies.
type change struct {
	mode     string
	why      string // why the whole list is compared
	add      []string
	remove   []item // subject to purge protection
	approved []item // removals an operator confirmed
	base     int    // list repos before the change: the purge threshold's 100%
	pending  []string
}

func (s *Syncer) sync(ctx context.Context, term int64, now time.Time) (fetched bool, err error) {
	ls, err := s.st.GetListSync(ctx)
	if err != nil {
		return false, fmt.Errorf("read list sync state: %w", err)
	}
	d, err := DecodeDetails(ls)
	if err != nil {
		s.log.Warn("list sync state unreadable; comparing the whole list", "err", err)
		d = Details{Rescan: true}
	}
	repo, closeRepo, err := s.fetch(ctx)
	if err != nil {
		return false, err
	}
	defer closeRepo()
	head, err := s.head(repo)
	if err != nil {
		return false, err
	}
	headHash := head.Hash.String()
	sameCfg := d.Repo == s.repoURL && d.Branch == s.cfg.Branch && slices.Equal(d.Paths, s.cfg.Paths)
	if headHash == ls.Commit && sameCfg && !d.Rescan && len(d.Pending) == 0 && !s.heldReady(d) {
		s.log.Debug("list unchanged", "commit", headHash)
		return true, nil
	}

	tree, err := head.Tree()
	if err != nil {
		return true, fmt.Errorf("read commit %s: %w", headHash, err)
	}
	cur, err := parseTree(tree, s.cfg.Paths, s.policy, s.cfg.MaxBytes, s.cfg.MaxURLs)
	if err != nil {
		return true, fmt.Errorf("list at commit %s: %w", headHash, err)
	}
	newCommit := headHash != ls.Commit || !sameCfg
	if newCommit {
		s.logBad(cur, headHash)
	}

	var ch change
	why := s.fullReason(d, ls.Commit, sameCfg)
	if why == "" {
		old, reason := s.oldList(repo, ls.Commit, head, cur)
		if old != nil {
			ch = diffLists(old, cur, d.Pending)
		}
		why = reason
	}
	if why != "" {
		ch, err = s.compareAll(ctx, cur)
		if err != nil {
			return true, err
		}
		ch.why = why
		s.log.Info("comparing the whole list with the stored list repos", "commit", headHash, "why", why)
	}

	// Purge protection. A confirmation covers the removals of the commit it was given
	// for; what a later commit removes on top is judged on its own.
	if h := d.Held; h != nil && d.Confirmed != "" && d.Confirmed == h.Commit {
		if h.Commit == headHash {
			ch.approved, ch.remove = ch.remove, nil
		} else if heldList, err := s.listAt(repo, h.Commit); err == nil {
			var rest []item
			for _, it := range ch.remove {
				if _, still := heldList.urls[it.id]; still {
					rest = append(rest, it)
				} else {
					ch.approved = append(ch.approved, it)
				}
			}
			ch.remove = rest
		} else {
			s.log.Warn("confirmed purge: its commit cannot be read; the removals need a new confirmation", "commit", h.Commit, "err", err)
		}
	}
	var held *HeldPurge
	if len(ch.remove) > 0 && s.exceeds(len(ch.remove), ch.base) {
		held = &HeldPurge{Commit: headHash, Remove: len(ch.remove), Of: ch.base, Threshold: s.cfg.PurgeThreshold, Since: now}
		if d.Held != nil && d.Held.Commit == headHash && d.Held.Remove == held.Remove {
			held.Since = d.Held.Since
		}
		for _, it := range ch.remove[:min(heldSample, len(ch.remove))] {
			held.Sample = append(held.Sample, it.url)
		}
		ch.remove = nil
	}

	added, pending, taken, err := s.addAll(ctx, term, now, ch.add, cur.givenOf)
	if err != nil {
		return true, err
	}
	pending = append(pending, ch.pending...)
	if len(taken) > 0 {
		// Retried (and reported) at every sync while listed, as pending adds are: the
		// repo holding the path may be deleted.
		for _, t := range taken {
			b := cur.badAt(cur.id(t.url), t.reason)
			cur.addBad(BadPathTaken, b)
			pending = append(pending, t.url)
			if newCommit || ch.mode == "full" {
				s.log.Warn("list line skipped", "at", fmt.Sprintf("%s:%d", b.File, b.Line), "reason", b.Reason, "text", b.Text, "commit", headHash)
			}
		}
	}
	removed, err := s.removeAll(ctx, term, slices.Concat(ch.approved, ch.remove))
	if err != nil {
		return true, err
	}

	nd := Details{Repo: s.repoURL, Branch: s.cfg.Branch, Paths: s.cfg.Paths, Entries: len(cur.urls),
		Mode: ch.mode, Added: added, Removed: removed, BadTotal: cur.badTotal, BadByCode: cur.badBy, Held: held}
	nd.BadLines = cur.bad
	slices.Sort(pending)
	pending = slices.Compact(pending)
	if len(pending) > MaxPendingKept {
		nd.Pending, nd.Rescan = pending[:MaxPendingKept], true
	} else {
		nd.Pending = pending
	}
	if !newCommit && added+removed == 0 {
		nd.Mode, nd.Added, nd.Removed = d.Mode, d.Added, d.Removed // a retry that changed nothing
	}
	extra, err := nd.encode()
	if err != nil {
		return true, err
	}
	if !newCommit && string(extra) == string(ls.Extra) {
		return true, nil // nothing to record
	}
	// The record comes last and is conditional on the version read at the start: if
	// anything (an operator's confirmation, another coordinator) wrote since, this
	// fails, and the next sync recomputes — the adds and deletes above repeat safely.
	rec := store.ListSync{Commit: headHash, AppliedAt: now, Extra: extra}
	if err := s.st.Apply(ctx, term, []store.Mutation{store.PutListSync{ListSync: rec, ExpectVersion: ls.Version}}); err != nil {
		return true, fmt.Errorf("record list commit %s: %w", headHash, err)
	}
	s.log.Info("list applied", "commit", headHash, "mode", ch.mode, "entries", len(cur.urls), "added", added,
		"removed", removed, "bad_lines", cur.badTotal, "pending", len(nd.Pending))
	if held != nil {
		s.log.Warn("list purge held: confirm it or raise the purge threshold", "commit", headHash,
			"remove", held.Remove, "of", held.Of, "percent", fmt.Sprintf("%.1f", held.Percent()),
			"threshold_percent", held.Threshold, "confirm", "mirrorfleet list confirm "+headHash)
	} else if d.Held != nil {
		s.log.Info("held list purge released", "commit", d.Held.Commit, "removed", removed)
	}
	if added+removed > 0 && s.onChange != nil {
		s.onChange()
	}
	return true, nil
}

// heldReady: a held purge that may now go ahead (confirmed, or the threshold raised).
func (s *Syncer) heldReady(d Details) bool {
	h := d.Held
	return h != nil && (d.Confirmed == h.Commit || !s.exceeds(h.Remove, h.Of))
}

// exceeds reports whether removing n of base list repos is more than the threshold.
func (s *Syncer) exceeds(n, base int) bool {
	return float64(n)*100 > s.cfg.PurgeThreshold*float64(base)
}

// fullReason says why the stored state cannot be trusted to equal the list at the last
// applied commit, so the whole list must be compared; "" when a diff is enough.
func (s *Syncer) fullReason(d Details, last string, sameCfg bool) string {
	switch {
	case last == "":
		return "first sync"
	case !sameCfg:
		return "the list repository, branch or paths changed"
	case d.Held != nil:
		return "a purge is held: the stored repos differ from the list"
	case d.Rescan:
		return "a rescan was requested"
	}
	return ""
}

// oldList is the list at the last applied commit, for the diff; nil and the reason
// when the diff cannot be trusted: the commit is gone from the clone (a fresh clone
// after a force-push) or is not an ancestor of the head (rewritten history).
func (s *Syncer) oldList(repo *git.Repository, last string, head *object.Commit, cur *list) (*list, string) {
	if last == head.Hash.String() {
		return cur, ""
	}
	if !isHash(last) {
		return nil, fmt.Sprintf("the stored commit %q is not a commit hash", last)
	}
	old, err := repo.CommitObject(plumbing.NewHash(last))
	if err != nil {
		return nil, fmt.Sprintf("the last applied commit %s is not in the list repository (history rewritten)", last)
	}
	if ok, err := old.IsAncestor(head); err != nil || !ok {
		return nil, fmt.Sprintf("history rewritten: the last applied commit %s is not an ancestor of %s", last, head.Hash)
	}
	l, err := s.listAt(repo, last)
	if err != nil {
		return nil, fmt.Sprintf("the list at the last applied commit cannot be read: %v", err)
	}
	return l, ""
}

// diffLists is the change from old to cur, plus the retries of URLs still listed whose
// add was refused before.
func diffLists(old, cur *list, pending []string) change {
	ch := change{mode: "diff", base: len(old.urls)}
	for id, u := range cur.urls {
		if _, ok := old.urls[id]; !ok {
			ch.add = append(ch.add, u)
		}
	}
	for _, u := range pending {
		if _, ok := old.urls[old.id(u)]; ok {
			if _, still := cur.urls[cur.id(u)]; still {
				ch.add = append(ch.add, u)
			}
		}
	}
	for id, u := range old.urls {
		if _, ok := cur.urls[id]; !ok {
			ch.remove = append(ch.remove, item{id, u})
		}
	}
	sortChange(&ch)
	return ch
}

// compareAll compares the whole list with the stored repos: every listed URL not stored
// is added, every stored source=list repo not listed is removed. It pages through all
// repos, as the store has no index by source.
func (s *Syncer) compareAll(ctx context.Context, cur *list) (change, error) {
	ch := change{mode: "full"}
	stored := make(map[string]struct{}, len(cur.urls))
	cursor := ""
	for {
		page, next, err := s.st.ListRepos(ctx, cursor, readPage)
		if err != nil {
			return ch, fmt.Errorf("list stored repos: %w", err)
		}
		for _, r := range page {
			isList := r.Source == store.SourceList && r.State != store.RepoDeleting
			if isList {
				ch.base++
			}
			// Looked up by the id the list gives its URL: a repo stored before ids
			// were folded (under the id of its own spelling) is still the line's.
			key := cur.id(r.URL)
			u, listed := cur.urls[key]
			switch {
			case listed && repos.SameRepo(s.policy, r.URL, u):
				stored[key] = struct{}{}
				if r.State == store.RepoDeleting {
					ch.pending = append(ch.pending, r.URL) // re-added once the delete is done
				}
			case listed:
				// Another URL holds the line's mirror path: the add below is refused,
				// and reported as a bad line.
			case isList:
				ch.remove = append(ch.remove, item{r.ID, r.URL})
			}
		}
		if next == "" {
			break
		}
		cursor = next
	}
	for id, u := range cur.urls {
		if _, ok := stored[id]; !ok {
			ch.add = append(ch.add, u)
		}
	}
	sortChange(&ch)
	return ch, nil
}

// sortChange orders a change for deterministic logs, samples and tests.
func sortChange(ch *change) {
	slices.Sort(ch.add)
	slices.SortFunc(ch.remove, func(a, b item) int { return cmp.Compare(a.url, b.url) })
}

// refusedAdd is a listed URL whose add was refused because another repo holds its
// mirror path.
type refusedAdd struct{ url, reason string }

// addAll adds the URLs (normalized) as source=list repos through repos.Add (the one way
// repos are added), each as the list wrote it (given). A repo being deleted refuses the add: it is returned as pending, retried at
// later syncs. A mirror path held by another repo refuses it too: returned as taken.
func (s *Syncer) addAll(ctx context.Context, term int64, now time.Time, urls []string, given func(string) string) (int, []string, []refusedAdd, error) {
	var mu sync.Mutex
	created := 0
	var pending []string
	var taken []refusedAdd
	err := s.parallel(ctx, len(urls), func(ctx context.Context, i int) error {
		u := urls[i]
		res := repos.Add(ctx, fencedCreator{s.st, term}, s.policy, given(u), store.SourceList, now)
		var ae *repos.Error
		switch {
		case res.Err == nil:
			if res.Created {
				mu.Lock()
				created++
				mu.Unlock()
			}
		case errors.As(res.Err, &ae) && ae.Kind == repos.BeingDeleted:
			mu.Lock()
			pending = append(pending, u)
			mu.Unlock()
		case errors.As(res.Err, &ae) && ae.Kind == repos.MirrorPathTake:
			mu.Lock()
			taken = append(taken, refusedAdd{u, ae.Message})
			mu.Unlock()
		case errors.As(res.Err, &ae):
			// The list was parsed with the same policy, so this is not expected; skip the
			// URL rather than stop the others.
			s.log.Warn("list URL refused when added", "url", u, "err", res.Err)
		default:
			return fmt.Errorf("add %s: %w", u, res.Err)
		}
		return nil
	})
	slices.SortFunc(taken, func(a, b refusedAdd) int { return cmp.Compare(a.url, b.url) })
	return created, pending, taken, err
}

// removeAll asks for the deletion of the listed repos that the list added: a repo
// added through the API (source=api) is never touched, whatever the list says.
func (s *Syncer) removeAll(ctx context.Context, term int64, items []item) (int, error) {
	var n atomic.Int64
	err := s.parallel(ctx, len(items), func(ctx context.Context, i int) error {
		it := items[i]
		r, err := s.st.GetRepo(ctx, it.id)
		if errors.Is(err, store.ErrNotFound) {
			// A repo stored before ids were folded is under the id of its spelling.
			r, err = repos.Find(ctx, s.st, s.policy, it.url)
		}
		if errors.Is(err, store.ErrNotFound) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("read repo %s: %w", it.id, err)
		}
		if r.Source != store.SourceList || r.State == store.RepoDeleting {
			return nil
		}
		err = s.st.RequestDeleteFenced(ctx, term, r.ID)
		if errors.Is(err, store.ErrNotFound) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("delete repo %s (%s): %w", it.id, it.url, err)
		}
		n.Add(1)
		return nil
	})
	return int(n.Load()), err
}

// parallel calls fn for 0..n-1 from up to `writers` goroutines and stops at the first
// error (a stale term's first refused write stops them all). Each write is one store
// round trip (a DynamoDB request, a bbolt transaction), so a 100k-line list would take
// long one at a time.
func (s *Syncer) parallel(ctx context.Context, n int, fn func(ctx context.Context, i int) error) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var (
		next  atomic.Int64
		wg    sync.WaitGroup
		once  sync.Once
		first error
	)
	fail := func(err error) {
		once.Do(func() { first = err; cancel() })
	}
	for range min(writers, n) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				i := int(next.Add(1) - 1)
				if i >= n {
					return
				}
				if err := fn(ctx, i); err != nil {
					fail(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	if first != nil {
		return first
	}
	return ctx.Err()
}

func (s *Syncer) logBad(l *list, commit string) {
	const shown = 20
	for _, b := range l.bad[:min(len(l.bad), shown)] {
		s.log.Warn("list line skipped", "at", fmt.Sprintf("%s:%d", b.File, b.Line), "reason", b.Reason, "text", b.Text, "commit", commit)
	}
	if l.badTotal > shown {
		s.log.Warn("list lines skipped", "more", l.badTotal-shown, "total", l.badTotal, "by_code", l.badBy, "commit", commit)
	}
}

// fetch brings the clone up to date (one ref advertisement when nothing changed) and
// opens it.
func (s *Syncer) fetch(ctx context.Context) (*git.Repository, func(), error) {
	if _, err := s.mirror.Sync(ctx, s.target); err != nil {
		return nil, nil, fmt.Errorf("fetch list repository %s: %w", s.repoURL, err)
	}
	dir, err := s.mirror.Path(s.target)
	if err != nil {
		return nil, nil, err
	}
	sto := filesystem.NewStorageWithOptions(osfs.New(dir), cache.NewObjectLRU(objectCache), filesystem.Options{})
	repo, err := git.Open(sto, nil)
	if err != nil {
		sto.Close()
		return nil, nil, fmt.Errorf("open list clone: %w", err)
	}
	return repo, func() { sto.Close() }, nil
}

// head resolves the configured branch, or HEAD, to its commit.
func (s *Syncer) head(repo *git.Repository) (*object.Commit, error) {
	name := plumbing.HEAD
	if s.cfg.Branch != "" {
		name, _ = branchRef(s.cfg.Branch) // Validate checked it
	}
	ref, err := repo.Reference(name, true)
	if err != nil {
		if s.cfg.Branch != "" {
			return nil, fmt.Errorf("branch %q not found in the list repository: %w", s.cfg.Branch, err)
		}
		return nil, fmt.Errorf("the list repository's HEAD does not resolve (no commits yet?): %w", err)
	}
	c, err := repo.CommitObject(ref.Hash())
	if err != nil {
		return nil, fmt.Errorf("%s of the list repository is not a commit: %w", name, err)
	}
	return c, nil
}

func (s *Syncer) listAt(repo *git.Repository, commit string) (*list, error) {
	if !isHash(commit) {
		return nil, fmt.Errorf("%q is not a commit hash", commit)
	}
	c, err := repo.CommitObject(plumbing.NewHash(commit))
	if err != nil {
		return nil, err
	}
	t, err := c.Tree()
	if err != nil {
		return nil, err
	}
	return parseTree(t, s.cfg.Paths, s.policy, s.cfg.MaxBytes, s.cfg.MaxURLs)
}

func isHash(s string) bool {
	_, err := hex.DecodeString(s)
	return err == nil && len(s) == 40
}
