// Package mirror keeps bare mirrors of upstream git repositories on a shared
// directory (EFS in production, a local directory in dev), using go-git v5.
//
// Layout under Config.Root (<rel> is mirrorpath.Rel of the URL, e.g.
// github.com/owner/repo.git; nothing but mirrors outside the dot directories, so the
// root can be served as it is):
//
//	<rel>               the bare mirror (all refs, +refs/*:refs/*); config records its origin URL
//	.locks/<rel>.lock   its lock file (flock), held during Sync, Trash and Maintain
//	.tmp/               clones in progress, renamed into place when done
//	.trash/             trashed mirrors waiting to be freed
//
// A Mirrorer is safe for concurrent use. One repo is never synced twice at once, in
// this process or another: Sync returns a fetch.KindBusy error instead of waiting.
// Every write into an existing mirror is atomic for its readers (see atomicFS).
package mirror

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	git "github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/config"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/cache"
	"github.com/go-git/go-git/v5/plumbing/transport"
	"github.com/go-git/go-git/v5/storage"
	"github.com/go-git/go-git/v5/storage/filesystem"
	"github.com/go-git/go-git/v5/storage/memory"

	"github.com/mirrorfleet/mirrorfleet/shared/fetch"
	"github.com/mirrorfleet/mirrorfleet/shared/gitcmd"
	"github.com/mirrorfleet/mirrorfleet/shared/mirrorpath"
)

// Defaults for Config.
const (
	DefaultTimeout          = 10 * time.Minute
	DefaultListTimeout      = 30 * time.Second
	DefaultObjectCacheBytes = 8 << 20
)

// mirrorRefSpec maps every upstream ref onto the same name, as `git clone --mirror`;
// it is what the mirror's config records, for git.
const mirrorRefSpec = config.RefSpec("+refs/*:refs/*")

// fetchRefSpec is the same mapping for go-git's fetch, without the "+": forcing comes
// from FetchOptions.Force instead. go-git v5 (RefSpec.Reverse, v5.19.3) keeps the "+"
// on the wrong side when it prunes, so with "+refs/*:refs/*" every fetch that prunes
// deletes every local ref and writes them all back: readers would see refs vanish, and
// each deletion rewrites packed-refs.
const fetchRefSpec = config.RefSpec("refs/*:refs/*")

// Config configures a Mirrorer.
type Config struct {
	// Root holds the mirrors, at <Root>/<mirrorpath.Rel(url)>. Required.
	Root string
	// TrashDir receives trashed mirrors; default <Root>/.trash. It must be on the
	// same file system as Root (Trash is a rename).
	TrashDir string
	// TmpDir holds clones in progress; default <Root>/.tmp. Same file system as Root.
	TmpDir string
	// Timeout bounds one clone or fetch transfer; default DefaultTimeout.
	Timeout time.Duration
	// ListTimeout bounds listing the upstream refs; default DefaultListTimeout.
	ListTimeout time.Duration
	// Client makes every HTTP request of this Mirrorer (its Transport's dialer is
	// where the URL policy is enforced at connect time). Nil: a plain client with
	// http.DefaultTransport, for dev and tests only. It is used by this Mirrorer only;
	// see transport.go for how it reaches go-git.
	Client *http.Client
	// Logger; nil discards.
	Logger *slog.Logger
	// ObjectCacheBytes bounds go-git's decoded-object LRU per open mirror; default
	// DefaultObjectCacheBytes (go-git's own default is 96 MiB).
	ObjectCacheBytes int64
	// Now is the clock a first clone's history window is measured from, and the
	// maintenance state's times (compared with the worker's slots); default time.Now.
	Now func() time.Time
	// Git runs maintenance (Maintain); without it Maintain fails. Fetching never
	// needs it.
	Git gitcmd.Git
	// Limits bound what an upstream can make one sync receive (limits.go).
	Limits Limits
	// AroundStep, if set, runs each git step of Maintain (MaintainOptions.Around): a
	// benchmark measures what each one reads. Nil in the fleet.
	AroundStep func(name string, step func() error) error
}

// Mirrorer syncs mirrors with go-git. Create it with New; Close waits for
// background trash removal.
type Mirrorer struct {
	root, tmpDir, trashDir string
	lockDir                string
	timeout, listTimeout   time.Duration
	cacheBytes             int64
	now                    func() time.Time
	limits                 Limits
	log                    *slog.Logger
	route                  *routeAuth
	git                    gitcmd.Git
	around                 func(string, func() error) error

	bg       sync.WaitGroup
	trashSem chan struct{} // at most one background RemoveAll at a time
	inflight sync.Map      // trash entry names being removed in the background
	mu       sync.Mutex
	closed   bool
}

// New checks the directories, installs the go-git transport dispatcher (once per
// process) and removes clones that a crashed or killed process left in TmpDir.
func New(cfg Config) (*Mirrorer, error) {
	if cfg.Root == "" {
		return nil, errors.New("mirror: Config.Root is required")
	}
	if err := cfg.Limits.Validate(); err != nil {
		return nil, fmt.Errorf("mirror: %w", err)
	}
	root, err := filepath.Abs(cfg.Root)
	if err != nil {
		return nil, fmt.Errorf("mirror: root: %w", err)
	}
	m := &Mirrorer{
		root:        root,
		tmpDir:      cfg.TmpDir,
		trashDir:    cfg.TrashDir,
		timeout:     cfg.Timeout,
		listTimeout: cfg.ListTimeout,
		cacheBytes:  cfg.ObjectCacheBytes,
		now:         cfg.Now,
		limits:      cfg.Limits.withDefaults(),
		log:         cfg.Logger,
		git:         cfg.Git,
		around:      cfg.AroundStep,
		trashSem:    make(chan struct{}, 1),
	}
	if m.tmpDir == "" {
		m.tmpDir = filepath.Join(root, ".tmp")
	}
	// Locks stay on the mirrors' file system (flock, or fcntl on NFS, is per file) but
	// out of the served tree.
	m.lockDir = filepath.Join(root, ".locks")
	if m.trashDir == "" {
		m.trashDir = filepath.Join(root, ".trash")
	}
	if m.tmpDir, err = filepath.Abs(m.tmpDir); err != nil {
		return nil, err
	}
	if m.trashDir, err = filepath.Abs(m.trashDir); err != nil {
		return nil, err
	}
	if m.timeout <= 0 {
		m.timeout = DefaultTimeout
	}
	if m.listTimeout <= 0 {
		m.listTimeout = DefaultListTimeout
	}
	if m.cacheBytes <= 0 {
		m.cacheBytes = DefaultObjectCacheBytes
	}
	if m.log == nil {
		m.log = slog.New(slog.DiscardHandler)
	}
	if m.now == nil {
		m.now = time.Now
	}
	for _, d := range []string{root, m.tmpDir, m.trashDir, m.lockDir} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return nil, fmt.Errorf("mirror: %w", err)
		}
	}
	var rs syscall.Stat_t
	if err := syscall.Stat(root, &rs); err != nil {
		return nil, fmt.Errorf("mirror: stat root: %w", err)
	}
	for _, d := range []string{m.tmpDir, m.trashDir} {
		var ds syscall.Stat_t
		if err := syscall.Stat(d, &ds); err != nil {
			return nil, fmt.Errorf("mirror: stat %s: %w", d, err)
		}
		if ds.Dev != rs.Dev {
			return nil, fmt.Errorf("mirror: %s is not on the same file system as %s (mirrors are moved by rename)", d, root)
		}
	}

	tr, _ := newGoGitTransport(cfg.Client)
	m.route = &routeAuth{t: tr}
	installDispatcher()

	m.cleanTmp()
	return m, nil
}

// Path is where t's mirror lives (or would live). It fails with a
// refused_by_policy error for URLs that cannot be mapped safely under Root.
func (m *Mirrorer) Path(t fetch.Target) (string, error) {
	rel, err := mirrorpath.Rel(t.URL)
	if err != nil {
		return "", err
	}
	p := filepath.Join(m.root, rel)
	if !strings.HasPrefix(p, m.root+string(filepath.Separator)) {
		return "", policyErr("URL maps outside the mirror root")
	}
	return p, nil
}

// LockPath is the lock file of t's mirror: <Root>/.locks/<mirror path>.lock. Whoever
// holds an exclusive flock on it (another process included) owns the mirror: Sync,
// Trash and Maintain report busy meanwhile.
func (m *Mirrorer) LockPath(t fetch.Target) (string, error) {
	dir, err := m.Path(t)
	if err != nil {
		return "", err
	}
	return m.lockPath(dir), nil
}

// Exists reports whether t has a mirror yet.
func (m *Mirrorer) Exists(t fetch.Target) bool {
	p, err := m.Path(t)
	return err == nil && isDir(p)
}

// Sync clones t if it has no mirror yet, else brings the mirror up to date with the
// upstream's refs: it lists them first and fetches only if they differ from the
// mirror's, with prune and force, so deleted refs go away and force-pushes are
// followed. The upstream's HEAD is followed too (symbolic target or detached hash).
//
// With t.RefsDigest (what the caller knows of the mirror's refs) the listing is
// compared with it first: the same refs end the sync there, and nothing under the
// mirror root is opened, listed, locked or even looked up (a no-change poll, DESIGN
// invariant 13; Result.SizeBytes is then 0). Refs that differ are fetched as below,
// against the mirror as it is on disk; a mirror that is not there although its refs
// were known is a corrupt error, not a silent clone (the caller forgets the digest
// and the next sync clones). t.Admit, if set, runs before anything is written.
//
// Result: LastCommitAt is the newest committer time over the commits the refs point
// to (annotated tags peeled, refs to trees and blobs skipped), set on a clone and when
// the refs changed, zero when they did not (nothing is read from the packs then: the
// caller keeps the time it had); Commits the commits a
// fetch brought (reachable from the new refs, not the old), or on a clone the newest
// of the history back to fetch.HistoryWindow with HistorySince where that listing
// begins, both walks bounded (see commits.go); SizeBytes the apparent size of the
// mirror's files; BytesReceived the HTTP response body bytes of this call (ref
// advertisements included); RefsDigest the mirror's refs after it. Without a digest,
// the no-change path reads the mirror's refs and directory entries, writes nothing
// and reads no object.
//
// Errors are *fetch.Error. A failed or cancelled sync never removes or rolls back an
// existing mirror: go-git writes a pack completely before it touches refs. An upstream
// that exceeds a limit (Config.Limits, t.MaxBytes) is cut off with a fetch.KindLimit
// error, one that trickles below the minimum rate with a fetch.KindTimeout error.
func (m *Mirrorer) Sync(ctx context.Context, t fetch.Target) (fetch.Result, error) {
	start := time.Now()
	dir, err := m.Path(t)
	if err != nil {
		return fetch.Result{}, err
	}
	u := redact(t.URL)
	if scheme := strings.ToLower(strings.SplitN(t.URL, ":", 2)[0]); !dispatcherInstalled(scheme) {
		return fetch.Result{}, policyErr("go-git's %s transport was replaced by another package; refusing to fetch around the URL policy", scheme)
	}
	if err := ctx.Err(); err != nil {
		return fetch.Result{}, classify(err)
	}
	res, err := m.sync(ctx, t, dir)
	if err != nil {
		err = classify(fmt.Errorf("sync %s: %w", u, err))
		// Debug: the caller logs the failure once, with its own context (the worker's
		// "fetch failed").
		m.log.Debug("mirror sync failed", "id", t.ID, "url", u, "kind", fetch.KindOf(err),
			"err", err, "took", time.Since(start))
		return fetch.Result{}, err
	}
	level := slog.LevelInfo
	if !res.Changed {
		level = slog.LevelDebug // the common no-change poll
	}
	m.log.Log(ctx, level, "mirror synced", "id", t.ID, "url", u, "cloned", res.Cloned, "changed", res.Changed,
		"bytes_received", res.BytesReceived, "size_bytes", res.SizeBytes, "took", time.Since(start))
	return res, nil
}

// sync is Sync's work on the mirror at dir; its errors are classified by Sync.
func (m *Mirrorer) sync(ctx context.Context, t fetch.Target, dir string) (fetch.Result, error) {
	var ad *advert // the upstream's refs, when the poll listed them already
	var listed int64
	if t.RefsDigest != "" {
		res, a, err := m.poll(ctx, t)
		if err != nil || a == nil {
			return res, err // unchanged: nothing under the root was touched
		}
		ad, listed = a, res.BytesReceived
	}
	if t.Admit != nil {
		maxBytes, err := t.Admit(ctx)
		if err != nil {
			return fetch.Result{}, err
		}
		if maxBytes > 0 && (t.MaxBytes <= 0 || maxBytes < t.MaxBytes) {
			t.MaxBytes = maxBytes
		}
	}
	lk, err := tryLock(m.lockPath(dir))
	if errors.Is(err, errLocked) {
		return fetch.Result{}, busyErr(redact(t.URL))
	}
	if err != nil {
		return fetch.Result{}, fmt.Errorf("lock: %w", err)
	}
	defer func() { lk.unlock(false) }()
	// Nothing of the mirror left behind (no lock file, no empty directories) when
	// there is no mirror at the end: a not_found repo would otherwise keep them forever.
	forget := func() {
		lk.unlock(true)
		lk = nil
		m.removeEmptyParents(dir)
		m.removeEmptyParents(m.lockPath(dir))
	}

	ctx, state := withSyncState(ctx, m.limits.forTarget(t))
	var res fetch.Result
	switch {
	case isDir(dir):
		res, err = m.update(ctx, t, dir, ad)
	case t.RefsDigest != "":
		forget()
		return res, &fetch.Error{Kind: fetch.KindCorrupt, Err: fmt.Errorf(
			"the mirror %s is missing although its refs were known (digest %s): the upstream's refs moved and there is nothing to fetch them into; the next sync clones it again",
			dir, t.RefsDigest)}
	default:
		res, err = m.clone(ctx, t, dir)
		if err != nil {
			forget()
		}
	}
	if err != nil {
		if rf := state.refused(); rf != nil {
			// What the guard refused, rather than what go-git made of the cut stream.
			err = rf
		}
		return fetch.Result{}, err
	}
	res.BytesReceived = listed + state.n.Load()
	if res.Changed {
		res.Packs = countPacks(dir)
	}
	if res.SizeBytes, err = dirSize(dir); err != nil {
		m.log.Warn("mirror size", "id", t.ID, "err", err)
	}
	return res, nil
}

// poll lists the upstream's refs and compares them with t.RefsDigest, touching nothing
// under the mirror root. The same refs: the result of a sync that changed nothing, and
// a nil advert. Others: the listing, for the sync to fetch.
func (m *Mirrorer) poll(ctx context.Context, t fetch.Target) (fetch.Result, *advert, error) {
	lctx, state := withSyncState(ctx, m.limits.forTarget(t))
	refs, head, err := m.list(lctx, memory.NewStorage(), t.FetchURL())
	res := fetch.Result{BytesReceived: state.n.Load()}
	if err != nil {
		if rf := state.refused(); rf != nil {
			err = rf
		}
		return res, nil, err
	}
	if d := refsDigest(refs, head); d == t.RefsDigest {
		res.RefsDigest = d
		return res, nil, nil
	}
	return res, &advert{refs: refs, head: head}, nil
}

// advert is an upstream's refs as listed: its refs/ hash refs and HEAD.
type advert struct {
	refs refMap
	head *plumbing.Reference
}

// storage opens dir as a bare repository with a small object cache. Writes go through
// atomicFS: readers of the mirror never see a torn file. noSync skips the fsyncs (a
// clone in a temp dir, synced as a whole before it is renamed into place). Packs stay
// open once read (KeepDescriptors; Close closes them), and with them the blocks read
// of each: go-git would open a pack again for every object.
func (m *Mirrorer) storage(dir string, noSync bool) *filesystem.Storage {
	return filesystem.NewStorageWithOptions(newAtomicFS(dir, noSync),
		cache.NewObjectLRU(cache.FileSize(m.cacheBytes)), filesystem.Options{KeepDescriptors: true})
}

// lockedStorage is storage for an existing mirror whose lock the caller holds: nothing
// else writes the repository while it is open, so go-git may list the packs and loose
// objects once instead of looking for each object it reads (ExclusiveAccess; what it
// writes itself it adds to the lists), and keep the packs open rather than open one
// again for every object (KeepDescriptors; Close closes them). On EFS each lookup and
// open is a metered operation (bench/storecost counts them).
func (m *Mirrorer) lockedStorage(dir string) *filesystem.Storage {
	return filesystem.NewStorageWithOptions(newAtomicFS(dir, false),
		cache.NewObjectLRU(cache.FileSize(m.cacheBytes)), filesystem.Options{ExclusiveAccess: true, KeepDescriptors: true})
}

// lockPath is the lock file of the mirror at dir: <root>/.locks/<rel>.lock.
func (m *Mirrorer) lockPath(dir string) string {
	rel, err := filepath.Rel(m.root, dir)
	if err != nil || !filepath.IsLocal(rel) {
		rel = sanitizeName(dir) // not reached: dirs come from Path
	}
	return filepath.Join(m.lockDir, rel) + ".lock"
}

// checkOrigin refuses a mirror directory whose config records another origin URL
// than want: two repos must never share a mirror (a fetch would mix their refs). A
// directory without a readable origin is left to the caller (a corrupt mirror of
// this repo is still this repo's).
func checkOrigin(dir, want string) error {
	got, err := recordedOrigin(dir)
	if err != nil || got == "" || got == want {
		return nil
	}
	return &fetch.Error{Kind: fetch.KindConflict,
		Err: fmt.Errorf("mirror %s belongs to %s, not %s: refusing to touch it (two repos map to one directory; delete one of them)", dir, redact(got), redact(want))}
}

// recordedOrigin is the origin URL in the mirror's config ("" if none).
func recordedOrigin(dir string) (string, error) {
	f, err := os.Open(filepath.Join(dir, "config"))
	if err != nil {
		return "", err
	}
	defer f.Close()
	cfg, err := config.ReadConfig(io.LimitReader(f, 1<<20))
	if err != nil {
		return "", err
	}
	if r, ok := cfg.Remotes[git.DefaultRemoteName]; ok && len(r.URLs) > 0 {
		return r.URLs[0], nil
	}
	return "", nil
}

// clone mirrors t into a fresh temp dir and renames it into place.
func (m *Mirrorer) clone(ctx context.Context, t fetch.Target, dir string) (res fetch.Result, err error) {
	tmp, tmpLock, err := m.newTempDir(t.ID)
	if err != nil {
		return res, fmt.Errorf("temp dir: %w", err)
	}
	placed := false
	defer func() {
		if !placed {
			if rmErr := os.RemoveAll(tmp); rmErr != nil {
				m.log.Warn("mirror: removing failed clone", "dir", tmp, "err", rmErr)
			}
		}
		tmpLock.unlock(true)
	}()

	sto := m.storage(tmp, true)
	defer sto.Close()
	repo, err := git.InitWithOptions(sto, nil, git.InitOptions{DefaultBranch: plumbing.Master})
	if err != nil {
		return res, fmt.Errorf("init: %w", err)
	}
	if _, err := repo.CreateRemote(&config.RemoteConfig{
		Name: git.DefaultRemoteName, URLs: []string{t.URL},
		Fetch: []config.RefSpec{mirrorRefSpec}, Mirror: true,
	}); err != nil {
		return res, fmt.Errorf("configure remote: %w", err)
	}

	// Not git.CloneContext: it fails on an empty upstream and on an upstream whose
	// HEAD dangles, and re-resolves HEAD itself. Listing first lets an empty
	// upstream become an empty bare repo with the remote configured.
	remote, remoteHead, err := m.list(ctx, sto, t.FetchURL())
	if err != nil {
		return res, err
	}
	if len(remote) > 0 {
		// The pack is indexed from disk rather than by go-git's PackWriter (packindex.go).
		first := firstPackStore{Storage: sto, packDir: filepath.Join(tmp, "objects", "pack")}
		if err := m.fetch(ctx, first, t.FetchURL()); err != nil {
			return res, err
		}
	}
	if _, err := setHead(sto, remoteHead, nil); err != nil {
		return res, fmt.Errorf("set HEAD: %w", err)
	}
	refs, head, err := localRefs(sto)
	if err != nil {
		return res, fmt.Errorf("read refs: %w", err)
	}
	res.RefsDigest = syncedDigest(refs, head, remote, remoteHead)
	if res.LastCommitAt, err = lastCommitAt(sto, refs); err != nil {
		return res, fmt.Errorf("read commits: %w", err)
	}
	if res.Commits, res.HistorySince, res.HistoryFromRoot, err = history(sto, refs, m.now(), fetch.HistoryWindow); err != nil {
		return res, fmt.Errorf("read history: %w", err)
	}
	// One packed-refs file instead of a file per ref: fewer files to read on every
	// poll (and to copy, stat or delete on EFS). Nobody reads the temp dir yet.
	if err := sto.PackRefs(); err != nil {
		return res, fmt.Errorf("pack refs: %w", err)
	}
	if err := sto.Close(); err != nil {
		return res, err
	}
	// Durable before it is visible: the rename must never expose a clone whose files
	// a crash could still empty.
	if err := syncTree(tmp); err != nil {
		return res, fmt.Errorf("sync clone: %w", err)
	}

	if err := os.MkdirAll(filepath.Dir(dir), 0o755); err != nil {
		return res, err
	}
	if err := os.Rename(tmp, dir); err != nil {
		return res, fmt.Errorf("move clone into place: %w", err)
	}
	placed = true
	if err := syncDir(filepath.Dir(dir)); err != nil {
		m.log.Warn("mirror: sync directory", "dir", filepath.Dir(dir), "err", err)
	}
	res.Cloned, res.Changed = true, true
	res.Refs = refMap{}.moves(refs)
	return res, nil
}

// update brings an existing mirror up to date; it fetches only when the upstream's
// refs differ from the mirror's. ad is the upstream's refs if a poll listed them
// already (nil: update lists them).
func (m *Mirrorer) update(ctx context.Context, t fetch.Target, dir string, ad *advert) (res fetch.Result, err error) {
	m.removePackTemps(dir, func(fi os.FileInfo) bool { return time.Since(fi.ModTime()) > m.timeout })

	if err := checkOrigin(dir, t.URL); err != nil {
		return res, err
	}
	sto := m.lockedStorage(dir)
	defer sto.Close()
	if _, err := git.Open(sto, nil); err != nil {
		return res, local("open", err)
	}
	have, haveHead, err := localRefs(sto)
	if err != nil {
		return res, local("read refs", err)
	}
	var want refMap
	var wantHead *plumbing.Reference
	if ad != nil {
		want, wantHead = ad.refs, ad.head
	} else if want, wantHead, err = m.list(ctx, sto, t.FetchURL()); err != nil {
		return res, err
	}

	refs := have
	var had *hadBefore // the packs before the fetch: what the mirror had
	if !have.equal(want) {
		res.Changed = true
		if len(want) == 0 {
			// Upstream has become empty; nothing to fetch, just drop the refs.
			for name := range have {
				if err := sto.RemoveReference(name); err != nil {
					return res, local("remove ref", err)
				}
			}
		} else {
			before := m.packTemps(dir)
			if had, err = packsOf(dir); err != nil {
				return res, local("list packs", err)
			}
			done, err := m.markFetch(t.ID, dir)
			if err != nil {
				return res, local("mark the fetch", err)
			}
			defer done()
			if err := m.fetch(ctx, sto, t.FetchURL()); err != nil {
				// The previous mirror stays: go-git writes the pack (to a temp file,
				// renamed when complete) before it touches any ref. Drop the temp
				// file a failed transfer may leave behind.
				m.removePackTemps(dir, func(fi os.FileInfo) bool { return !before[fi.Name()] })
				return res, err
			}
		}
		if refs, _, err = localRefs(sto); err != nil {
			return res, local("read refs", err)
		}
		res.Refs = have.moves(refs)
		if had != nil {
			if res.Commits, err = newCommits(sto, had.has, have, refs); err != nil {
				return res, local("read new commits", err)
			}
		}
	}
	headChanged, err := setHead(sto, wantHead, haveHead)
	if err != nil {
		return res, local("set HEAD", err)
	}
	res.Changed = res.Changed || headChanged
	head := haveHead
	if headChanged {
		head = wantHead
	}
	res.RefsDigest = syncedDigest(refs, head, want, wantHead)
	// The tips' commits are read only when the refs moved: reading them on every poll
	// would touch the pack (a few pages, but on EFS any read restarts the whole file's
	// lifecycle timer) of a mirror that nothing else reads. Unchanged refs: the caller
	// keeps the time it has (zero LastCommitAt).
	if !have.equal(refs) {
		if res.LastCommitAt, err = lastCommitAt(sto, refs); err != nil {
			return res, local("read commits", err)
		}
	}
	return res, nil
}

// list asks the upstream for its refs (one GET of info/refs). sto is not read.
func (m *Mirrorer) list(ctx context.Context, sto storage.Storer, rawURL string) (refMap, *plumbing.Reference, error) {
	lctx, cancel := context.WithTimeout(ctx, m.listTimeout)
	defer cancel()
	rem := git.NewRemote(sto, &config.RemoteConfig{Name: git.DefaultRemoteName, URLs: []string{rawURL}})
	list, err := rem.ListContext(lctx, &git.ListOptions{Auth: m.route})
	if isErr(err, transport.ErrEmptyRemoteRepository) {
		return refMap{}, nil, nil
	}
	if err != nil {
		return nil, nil, stepErr(lctx, "list refs", err)
	}
	refs, head := remoteRefs(list)
	return refs, head, nil
}

// fetch runs a mirror fetch: all refs, pruned, forced.
func (m *Mirrorer) fetch(ctx context.Context, sto storage.Storer, rawURL string) error {
	fctx, cancel := context.WithTimeout(ctx, m.timeout)
	defer cancel()
	specs := []config.RefSpec{fetchRefSpec}
	rem := git.NewRemote(sto, &config.RemoteConfig{
		Name: git.DefaultRemoteName, URLs: []string{rawURL}, Fetch: specs, Mirror: true,
	})
	err := rem.FetchContext(fctx, &git.FetchOptions{
		RemoteName: git.DefaultRemoteName,
		RefSpecs:   specs,
		Auth:       m.route,
		Tags:       git.NoTags, // refs/tags/* are in the refspec already
		Prune:      true,
		Force:      true,
	})
	switch {
	case err == nil, errors.Is(err, git.NoErrAlreadyUpToDate):
		return nil
	case isErr(err, transport.ErrEmptyRemoteRepository):
		// Emptied between list and fetch; the next sync prunes.
		return nil
	}
	return stepErr(fctx, "fetch", err)
}

// setHead makes the mirror's HEAD follow the upstream's. A nil upstream HEAD (empty
// repo, or none advertised) leaves it alone.
func setHead(sto *filesystem.Storage, want, have *plumbing.Reference) (bool, error) {
	if want == nil || sameHead(want, have) {
		return false, nil
	}
	var ref *plumbing.Reference
	if want.Type() == plumbing.SymbolicReference {
		ref = plumbing.NewSymbolicReference(plumbing.HEAD, want.Target())
	} else {
		if _, err := sto.EncodedObject(plumbing.AnyObject, want.Hash()); err != nil {
			return false, nil // detached HEAD at an object we did not fetch
		}
		ref = plumbing.NewHashReference(plumbing.HEAD, want.Hash())
	}
	return true, sto.SetReference(ref)
}

// packTemps lists the temp files in objects/pack.
func (m *Mirrorer) packTemps(dir string) map[string]bool {
	out := map[string]bool{}
	entries, _ := os.ReadDir(filepath.Join(dir, "objects", "pack"))
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), "tmp_") {
			out[e.Name()] = true
		}
	}
	return out
}

// removePackTemps removes temp files (tmp_pack_*, tmp_obj_*) in objects/pack that
// match; only called under the repo lock.
func (m *Mirrorer) removePackTemps(dir string, match func(os.FileInfo) bool) {
	packDir := filepath.Join(dir, "objects", "pack")
	for name := range m.packTemps(dir) {
		p := filepath.Join(packDir, name)
		fi, err := os.Lstat(p)
		if err != nil || !fi.Mode().IsRegular() || !match(fi) {
			continue
		}
		if err := os.Remove(p); err == nil {
			m.log.Info("mirror: removed temp pack file", "path", p)
		}
	}
}

// newTempDir makes a fresh clone dir in TmpDir with its own lock, so that cleanTmp
// (another process starting up) can tell a live clone from a dead one.
func (m *Mirrorer) newTempDir(id string) (string, *fileLock, error) {
	var b [8]byte
	_, _ = rand.Read(b[:])
	dir := filepath.Join(m.tmpDir, sanitizeName(id)+"-"+hex.EncodeToString(b[:]))
	l, err := tryLock(dir + ".lock")
	if err != nil {
		return "", nil, err
	}
	if err := os.Mkdir(dir, 0o755); err != nil {
		l.unlock(true)
		return "", nil, err
	}
	return dir, l, nil
}

// fetchMarker starts the name of the file markFetch leaves in TmpDir.
const fetchMarker = "fetch-"

// markFetch records in TmpDir that a fetch into the mirror at dir is under way: a file
// naming the mirror, whose lock the fetch holds. A process killed mid-fetch leaves the
// file with its lock free, and the next start (cleanTmp) removes the temp pack files
// that fetch left in the mirror, which would otherwise stay (a no-change poll does not
// look) and count in its size. done removes the file.
func (m *Mirrorer) markFetch(id, dir string) (done func(), err error) {
	rel, err := filepath.Rel(m.root, dir)
	if err != nil || !filepath.IsLocal(rel) {
		return nil, fmt.Errorf("mirror %s is not under the root", dir)
	}
	var b [8]byte
	_, _ = rand.Read(b[:])
	p := filepath.Join(m.tmpDir, fetchMarker+sanitizeName(id)+"-"+hex.EncodeToString(b[:]))
	l, err := tryLock(p + ".lock")
	if err != nil {
		return nil, err
	}
	if err := os.WriteFile(p, []byte(filepath.ToSlash(rel)), 0o644); err != nil {
		l.unlock(true)
		return nil, err
	}
	return func() {
		_ = os.Remove(p)
		l.unlock(true)
	}, nil
}

// cleanKilledFetch removes the temp pack files a killed fetch left in the mirror its
// marker p names, under the mirror's lock, then the marker. A mirror busy now (another
// process fetching it) keeps its marker for the next start.
func (m *Mirrorer) cleanKilledFetch(p string) {
	b, err := os.ReadFile(p)
	rel := filepath.FromSlash(string(b))
	if err != nil || !filepath.IsLocal(rel) {
		_ = os.Remove(p) // not one of ours, or unreadable: nothing to clean by it
		return
	}
	dir := filepath.Join(m.root, rel)
	lk, err := tryLock(m.lockPath(dir))
	if err != nil {
		return
	}
	defer lk.unlock(false)
	if isDir(dir) {
		m.removePackTemps(dir, func(os.FileInfo) bool { return true })
	}
	_ = os.Remove(p)
}

// cleanTmp removes temp clones nobody holds the lock of, and the temp pack files of
// killed fetches (markFetch): leftovers of a crash.
func (m *Mirrorer) cleanTmp() {
	entries, err := os.ReadDir(m.tmpDir)
	if err != nil {
		m.log.Warn("mirror: reading temp dir", "err", err)
		return
	}
	names := map[string]bool{}
	for _, e := range entries {
		names[e.Name()] = true
	}
	for _, e := range entries {
		name := e.Name()
		if strings.HasSuffix(name, ".lock") {
			if names[strings.TrimSuffix(name, ".lock")] {
				continue // handled with its dir
			}
			if l, err := tryLock(filepath.Join(m.tmpDir, name)); err == nil {
				l.unlock(true)
			}
			continue
		}
		p := filepath.Join(m.tmpDir, name)
		l, err := tryLock(p + ".lock")
		if err != nil {
			continue // a live clone or fetch
		}
		if strings.HasPrefix(name, fetchMarker) && e.Type().IsRegular() {
			m.cleanKilledFetch(p)
			l.unlock(true)
			continue
		}
		if err := os.RemoveAll(p); err != nil {
			m.log.Warn("mirror: removing stale temp dir", "dir", p, "err", err)
		} else {
			m.log.Info("mirror: removed stale temp dir", "dir", p)
		}
		l.unlock(true)
	}
}

// Trash moves t's mirror out of the way at once (a rename into TrashDir, under the
// repo lock) and frees the space in the background. No mirror: nil. A sync in
// progress: a busy error.
func (m *Mirrorer) Trash(ctx context.Context, t fetch.Target) error {
	dir, err := m.Path(t)
	if err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return classify(err)
	}
	lk, err := tryLock(m.lockPath(dir))
	if errors.Is(err, errLocked) {
		return busyErr(redact(t.URL))
	}
	if err != nil {
		return classify(fmt.Errorf("trash: lock: %w", err))
	}
	if !isDir(dir) {
		lk.unlock(true)
		m.removeEmptyParents(dir)
		m.removeEmptyParents(m.lockPath(dir))
		return nil
	}
	if err := checkOrigin(dir, t.URL); err != nil {
		lk.unlock(false)
		m.log.Warn("mirror not trashed: it belongs to another repo", "id", t.ID, "url", redact(t.URL), "err", err)
		return err
	}
	dst, err := m.moveToTrash(dir, t.ID)
	if err != nil {
		lk.unlock(false)
		return classify(fmt.Errorf("trash: %w", err))
	}
	m.removeState(dir)
	lk.unlock(true)
	m.removeEmptyParents(dir)
	m.removeEmptyParents(m.lockPath(dir))
	m.log.Info("mirror trashed", "id", t.ID, "url", redact(t.URL), "to", dst)
	return nil
}

// moveToTrash renames dir into TrashDir at once and frees it in the background. The
// caller holds the mirror's lock.
func (m *Mirrorer) moveToTrash(dir, id string) (string, error) {
	name := fmt.Sprintf("%s-%d", sanitizeName(id), time.Now().UnixNano())
	dst := filepath.Join(m.trashDir, name)
	if err := os.Rename(dir, dst); err != nil {
		return "", err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return dst, nil // EmptyTrash frees it later
	}
	m.inflight.Store(name, struct{}{})
	m.bg.Add(1)
	go func() {
		defer m.bg.Done()
		defer m.inflight.Delete(name)
		m.trashSem <- struct{}{}
		defer func() { <-m.trashSem }()
		if err := os.RemoveAll(dst); err != nil {
			m.log.Warn("mirror: freeing trash", "dir", dst, "err", err)
		}
	}()
	return dst, nil
}

// EmptyTrash frees everything in TrashDir (for example what a crashed process left)
// except entries that this Mirrorer is freeing in the background already. It stops
// between entries when ctx is done.
func (m *Mirrorer) EmptyTrash(ctx context.Context) error {
	entries, err := os.ReadDir(m.trashDir)
	if err != nil {
		return err
	}
	var errs []error
	for _, e := range entries {
		if err := ctx.Err(); err != nil {
			return err
		}
		if _, busy := m.inflight.Load(e.Name()); busy {
			continue
		}
		if err := os.RemoveAll(filepath.Join(m.trashDir, e.Name())); err != nil && !os.IsNotExist(err) {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// Close waits for background trash removal. Syncs must have returned.
func (m *Mirrorer) Close() error {
	m.mu.Lock()
	m.closed = true
	m.mu.Unlock()
	m.bg.Wait()
	return nil
}

// removeEmptyParents removes the now empty directories between p and Root (or the
// lock directory, for a lock file). A concurrent locker that loses its directory this
// way retries (see tryLock).
func (m *Mirrorer) removeEmptyParents(p string) {
	stop := m.root
	if strings.HasPrefix(p, m.lockDir+string(filepath.Separator)) {
		stop = m.lockDir
	}
	for d := filepath.Dir(p); strings.HasPrefix(d, stop+string(filepath.Separator)); d = filepath.Dir(d) {
		if os.Remove(d) != nil {
			return
		}
	}
}

// syncTree fsyncs every file and directory under dir.
func syncTree(dir string) error {
	return filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() && !d.Type().IsRegular() {
			return nil
		}
		if d.IsDir() {
			return syncDir(p)
		}
		f, err := os.Open(p)
		if err != nil {
			return err
		}
		defer f.Close()
		return f.Sync()
	})
}

func isDir(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && fi.IsDir()
}

// redact drops a password from a URL for logs and errors.
func redact(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return "<unparsable URL>"
	}
	return u.Redacted()
}
