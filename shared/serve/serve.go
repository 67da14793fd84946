// Package serve is the fleet's git front: every mirror under the mirrors root is
// served read-only over git's smart HTTP at /git/<mirror path> (with or without
// .git), protocol v2 and v0/v1, by git's own upload-pack (`upload-pack
// --stateless-rpc`, as git http-backend runs it), with shallow and partial clone.
// The front does what http-backend would and what a public server needs besides:
// it checks every path before anything touches the file system, never serves
// receive-pack or the dumb protocol, bounds request bodies and the git processes it
// runs (per repo, per client and in all, with a bounded queue per client: 429 and
// 503 with Retry-After past them), times out clients that stop sending or reading,
// optionally asks for a token, and feeds the pack cache (packcache) through
// upload-pack's packObjectsHook.
//
// The mirrors root may be read-only: upload-pack runs on a per-request scratch git
// directory whose commondir is the mirror (as a linked worktree's is), so the
// temporary files git writes for a shallow clone go to the scratch, never into the
// mirror.
package serve

import (
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/mirrorfleet/mirrorfleet/shared/gitcmd"
	"github.com/mirrorfleet/mirrorfleet/shared/httpguard"
	"github.com/mirrorfleet/mirrorfleet/shared/metrics"
	"github.com/mirrorfleet/mirrorfleet/shared/serve/packcache"
)

// Defaults of Config.
const (
	DefaultMaxPerRepo      = 32
	DefaultMaxTotal        = 64
	DefaultMaxPerClient    = 8
	DefaultQueuePerClient  = 16
	DefaultQueue           = 64
	DefaultQueueWait       = 30 * time.Second
	DefaultRetryAfter      = 5 * time.Second
	DefaultMaxRequestBytes = 16 << 20
	DefaultReadTimeout     = 30 * time.Second
	DefaultIdleTimeout     = 2 * time.Minute
)

// Sink receives the front's metrics (metrics.Prometheus, metrics.EMF).
type Sink interface {
	Record(...metrics.Sample) error
}

// Config configures a front. Root and Git are required.
type Config struct {
	Root string // the mirrors root; read-only is fine
	Git  string // the git binary (gitcmd.Find)
	// Scratch holds the per-request git directories; "" is the system's temporary
	// directory. Local disk, writable.
	Scratch string
	// PackCache, with a Dir and a Hook, puts the pack cache in front of
	// pack-objects. Hook is the command that runs packcache.Main (the mirrorfleet
	// binary and packcache.Arg); nil means no cache.
	PackCache packcache.Config
	Hook      []string
	// Token, if set, is needed for every read: HTTP Basic with the token as the
	// password (what git's credential helpers send), or Authorization: Bearer.
	Token string
	// Allow, if set, lists the client networks that may read without the token; with
	// no Token, only they may read at all.
	Allow []netip.Prefix
	// MaxPerRepo and MaxTotal bound the git processes at once for one repo and in
	// all, MaxPerClient one client's requests at once. A request past them waits,
	// in a queue of at most QueuePerClient of its client's requests and Queue in
	// all, up to QueueWait; then (or at once, past the queue) it gets 429 (its
	// client or the repo is busy) or 503 (the server is) with Retry-After, as
	// Gitaly's concurrency limiter does. A client is its address
	// (httpguard.ClientAddr): the peer's, or from X-Forwarded-For when the peer is
	// in TrustedProxies.
	MaxPerRepo, MaxTotal, MaxPerClient int
	QueuePerClient, Queue              int
	QueueWait                          time.Duration
	TrustedProxies                     []netip.Prefix
	RetryAfter                         time.Duration
	// MaxRequestBytes bounds a request body after decompression.
	MaxRequestBytes int64
	// ReadTimeout bounds reading a request body; IdleTimeout the time a response
	// write may block (a client that stops reading). A long clone that keeps
	// reading is cut only after gitcmd.DefaultTimeout (a day).
	ReadTimeout, IdleTimeout time.Duration
	// Index lists the repos for GET /git/; nil: no index.
	Index Lister
	// BaseURL is the clone base URL the index shows (http://host:port); "": the
	// index shows path-only URLs. Never the request's Host.
	BaseURL string
	Metrics Sink
	Log     *slog.Logger
}

func (c Config) withDefaults() Config {
	set := func(v *int, d int) {
		if *v <= 0 {
			*v = d
		}
	}
	setD := func(v *time.Duration, d time.Duration) {
		if *v <= 0 {
			*v = d
		}
	}
	set(&c.MaxPerRepo, DefaultMaxPerRepo)
	set(&c.MaxTotal, DefaultMaxTotal)
	set(&c.MaxPerClient, DefaultMaxPerClient)
	set(&c.QueuePerClient, DefaultQueuePerClient)
	set(&c.Queue, DefaultQueue)
	setD(&c.QueueWait, DefaultQueueWait)
	setD(&c.RetryAfter, DefaultRetryAfter)
	setD(&c.ReadTimeout, DefaultReadTimeout)
	setD(&c.IdleTimeout, DefaultIdleTimeout)
	if c.MaxRequestBytes <= 0 {
		c.MaxRequestBytes = DefaultMaxRequestBytes
	}
	if c.Scratch == "" {
		c.Scratch = os.TempDir()
	}
	if c.Log == nil {
		c.Log = slog.New(slog.DiscardHandler)
	}
	return c
}

// Handler is a running front. Close it to stop the pack cache's report socket.
type Handler struct {
	cfg      Config
	root     string // Root with symlinks resolved
	limit    *httpguard.Limiter
	hook     string // uploadpack.packObjectsHook; "" without a cache
	reports  *packcache.Listener
	git      gitcmd.Git
	env      []string // added to git's environment (gitcmd.Environ)
	tokenSum [32]byte
	closing  sync.Once
}

// New checks the configuration (the root is a readable directory, the pack cache's
// directory writable) and returns the front.
func New(cfg Config) (*Handler, error) {
	cfg = cfg.withDefaults()
	if cfg.Git == "" {
		return nil, errors.New("serve: no git binary")
	}
	root, err := filepath.EvalSymlinks(cfg.Root)
	if err != nil {
		return nil, fmt.Errorf("serve: mirrors root: %w", err)
	}
	if root, err = filepath.Abs(root); err != nil {
		return nil, fmt.Errorf("serve: mirrors root: %w", err)
	}
	if _, err := os.ReadDir(root); err != nil {
		return nil, fmt.Errorf("serve: mirrors root %s is not a readable directory: %w", cfg.Root, err)
	}
	h := &Handler{cfg: cfg, root: root, limit: httpguard.NewLimiter(httpguard.PoolLimits{Total: cfg.MaxTotal,
		PerClient: cfg.MaxPerClient, PerKey: cfg.MaxPerRepo, QueuePerClient: cfg.QueuePerClient, QueueTotal: cfg.Queue}),
		tokenSum: sha256.Sum256([]byte(cfg.Token))}
	h.git = gitcmd.Git{Path: cfg.Git, Metrics: cfg.Metrics}
	h.env = []string{packcache.EnvGit + "=" + cfg.Git}
	if cfg.PackCache.Dir != "" && len(cfg.Hook) > 0 {
		if err := packcache.Prepare(cfg.PackCache); err != nil {
			return nil, fmt.Errorf("serve: %w", err)
		}
		// One walk of the cache now; from here on the index evicts without one.
		if h.cfg.PackCache.Index, err = packcache.OpenIndex(cfg.PackCache); err != nil {
			return nil, fmt.Errorf("serve: pack cache: %w", err)
		}
		h.reports, err = packcache.Listen("", h.recordCache, cfg.Log)
		if err != nil {
			return nil, fmt.Errorf("serve: pack cache report socket: %w", err)
		}
		h.hook = shellQuote(cfg.Hook)
		h.env = append(h.env,
			packcache.EnvDir+"="+cfg.PackCache.Dir,
			packcache.EnvReport+"="+h.reports.Path)
		if cfg.PackCache.MaxBytes > 0 {
			h.env = append(h.env, packcache.EnvBytes+"="+strconv.FormatInt(cfg.PackCache.MaxBytes, 10))
		}
		if cfg.PackCache.TTL > 0 {
			h.env = append(h.env, packcache.EnvTTL+"="+cfg.PackCache.TTL.String())
		}
		if cfg.PackCache.MaxEntries > 0 {
			h.env = append(h.env, packcache.EnvEntries+"="+strconv.Itoa(cfg.PackCache.MaxEntries))
		}
	}
	return h, nil
}

// Close releases the report socket.
func (h *Handler) Close() error {
	var err error
	h.closing.Do(func() {
		if h.reports != nil {
			err = h.reports.Close()
		}
	})
	return err
}

// shellQuote makes a command line for git to run through sh (as it runs the hook).
func shellQuote(args []string) string {
	q := make([]string, len(args))
	for i, a := range args {
		q[i] = "'" + strings.ReplaceAll(a, "'", `'\''`) + "'"
	}
	return strings.Join(q, " ")
}

// ServeHTTP answers /git/ requests; anything else is a 404.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	rw := &recorder{ResponseWriter: w}
	defer h.recordRequest(rw)
	p := r.URL.EscapedPath()
	if p == "/git" || p == Prefix {
		if !h.authorized(rw, r) {
			return
		}
		h.index(rw, r)
		return
	}
	if !h.authorized(rw, r) {
		return
	}
	req, err := parsePath(p)
	if err != nil {
		var pe *pathError
		errors.As(err, &pe)
		fail(rw, pe.status, pe.msg)
		return
	}
	switch req.svc {
	case svcReceive:
		fail(rw, http.StatusForbidden, "this is a read-only mirror: pushing (git-receive-pack) is not served")
		return
	case svcDumb:
		fail(rw, http.StatusNotFound, "the dumb HTTP protocol is not served; use a git client that speaks smart HTTP (git 1.6.6 or newer)")
		return
	case svcInfoRefs:
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			rw.Header().Set("Allow", "GET, HEAD")
			fail(rw, http.StatusMethodNotAllowed, "info/refs takes GET")
			return
		}
		switch s := r.URL.Query().Get("service"); s {
		case "git-upload-pack":
		case "git-receive-pack":
			fail(rw, http.StatusForbidden, "this is a read-only mirror: pushing (git-receive-pack) is not served")
			return
		case "":
			fail(rw, http.StatusForbidden, "the dumb HTTP protocol is not served; use a git client that speaks smart HTTP (git 1.6.6 or newer)")
			return
		default:
			fail(rw, http.StatusBadRequest, fmt.Sprintf("unknown service %q: only git-upload-pack is served", truncate(s, 64)))
			return
		}
	case svcUploadPack:
		if r.Method != http.MethodPost {
			rw.Header().Set("Allow", "POST")
			fail(rw, http.StatusMethodNotAllowed, "git-upload-pack takes POST")
			return
		}
	}
	dir, err := h.resolve(req.rel)
	if err != nil {
		fail(rw, http.StatusNotFound, err.Error())
		return
	}
	proto := r.Header.Get("Git-Protocol")
	if !validProtocol(proto) {
		fail(rw, http.StatusBadRequest, "malformed Git-Protocol header")
		return
	}
	var body []byte
	if req.svc == svcUploadPack {
		if body, err = h.readBody(rw, r); err != nil {
			var he *httpError
			errors.As(err, &he)
			fail(rw, he.status, he.msg)
			return
		}
	}
	release, why := h.limit.Acquire(r.Context(), httpguard.ClientAddr(r, h.cfg.TrustedProxies), dir, h.cfg.QueueWait)
	switch why {
	case httpguard.ClientBusy:
		h.reject(rw, http.StatusTooManyRequests, fmt.Sprintf("too many requests from your address at once (%d run at a time, %d wait); retry later",
			h.cfg.MaxPerClient, h.cfg.QueuePerClient))
		return
	case httpguard.KeyBusy:
		h.reject(rw, http.StatusTooManyRequests, "too many clones of this repository at once; retry later")
		return
	case httpguard.ServerBusy:
		h.reject(rw, http.StatusServiceUnavailable, "the server is serving as many clones as it can; retry later")
		return
	}
	defer release()
	h.answer(rw, r, dir, req, proto, body)
}

// resolve maps a mirror path to its directory: it must exist under the root (after
// symlinks) and look like a git repository.
func (h *Handler) resolve(rel string) (string, error) {
	notFound := fmt.Errorf("no mirror at %s", truncate(rel, 200))
	p := filepath.Join(h.root, filepath.FromSlash(rel))
	real, err := filepath.EvalSymlinks(p)
	if err != nil {
		return "", notFound
	}
	if r, err := filepath.Rel(h.root, real); err != nil || !filepath.IsLocal(r) {
		return "", notFound
	}
	for _, part := range []string{"HEAD", "objects", "refs"} {
		if _, err := os.Lstat(filepath.Join(real, part)); err != nil {
			return "", notFound
		}
	}
	return real, nil
}

// validProtocol accepts the Git-Protocol header git sends (version=2, and other
// key=value pairs separated by colons), which goes into upload-pack's environment.
func validProtocol(v string) bool {
	if len(v) > 256 {
		return false
	}
	for i := 0; i < len(v); i++ {
		c := v[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.IndexByte("=:._-", c) >= 0) {
			return false
		}
	}
	return true
}

type httpError struct {
	status int
	msg    string
}

func (e *httpError) Error() string { return e.msg }

// readBody reads a whole upload-pack request, decompressed, within the read timeout
// and the size bound, and checks that it is pkt-lines.
func (h *Handler) readBody(w http.ResponseWriter, r *http.Request) ([]byte, error) {
	if ct := r.Header.Get("Content-Type"); ct != "application/x-git-upload-pack-request" {
		return nil, &httpError{http.StatusUnsupportedMediaType, fmt.Sprintf("Content-Type %q: git-upload-pack takes application/x-git-upload-pack-request", truncate(ct, 64))}
	}
	rc := http.NewResponseController(w)
	// The deadline stays on a refused body: net/http then gives up on the rest of it
	// instead of waiting to reuse the connection.
	_ = rc.SetReadDeadline(time.Now().Add(h.cfg.ReadTimeout))
	limit := h.cfg.MaxRequestBytes
	var in io.Reader = http.MaxBytesReader(w, r.Body, limit)
	switch enc := r.Header.Get("Content-Encoding"); enc {
	case "", "identity":
	case "gzip", "x-gzip":
		zr, err := gzip.NewReader(in)
		if err != nil {
			return nil, &httpError{http.StatusBadRequest, fmt.Sprintf("request body is not gzip: %v", err)}
		}
		defer zr.Close()
		in = zr
	default:
		return nil, &httpError{http.StatusUnsupportedMediaType, fmt.Sprintf("Content-Encoding %q: gzip or none", truncate(enc, 32))}
	}
	body, err := io.ReadAll(io.LimitReader(in, limit+1))
	var mbe *http.MaxBytesError
	switch {
	case errors.As(err, &mbe) || int64(len(body)) > limit:
		return nil, &httpError{http.StatusRequestEntityTooLarge, fmt.Sprintf("request body over %d bytes", limit)}
	case isTimeout(err):
		return nil, &httpError{http.StatusRequestTimeout, "the request body did not arrive in time"}
	case err != nil:
		return nil, &httpError{http.StatusBadRequest, fmt.Sprintf("reading the request body: %v", err)}
	}
	if err := checkPktLines(body); err != nil {
		return nil, &httpError{http.StatusBadRequest, "malformed request: " + err.Error()}
	}
	_ = rc.SetReadDeadline(time.Time{})
	return body, nil
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.Is(err, os.ErrDeadlineExceeded) || (errors.As(err, &ne) && ne.Timeout())
}

// uploadPack runs git upload-pack for one request and streams its output. With fill,
// the response goes into the pack cache's whole-response entry at disk speed and the
// client is sent it from there (and the hook does not cache the pack again); it
// reports whether git answered in full, and the client got it. git and whatever it
// starts (the hook, pack-objects) run in a process group of their own, killed when
// the request ends.
func (h *Handler) uploadPack(w *recorder, r *http.Request, dir string, req request, proto string, body []byte, fill *packcache.Fill) bool {
	if fill != nil {
		defer fill.Abort() // a no-op once it ran
	}
	scratch, err := h.scratchDir(dir)
	if err != nil {
		h.cfg.Log.Error("serve: scratch git directory", "err", err)
		fail(w, http.StatusInternalServerError, "internal error: no scratch space")
		return false
	}
	defer os.RemoveAll(scratch)

	args := uploadPackArgs(h.hook)
	if req.svc == svcInfoRefs {
		args = append(args, "--advertise-refs")
	}
	args = append(args, scratch)

	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	env := append(append([]string(nil), h.env...), packcache.EnvRepo+"="+dir)
	if fill != nil {
		env = append(env, packcache.EnvDir+"=") // the last one counts: no pack entry besides the response's
	}
	if proto != "" {
		env = append(env, "GIT_PROTOCOL="+proto)
	}
	// git and whatever it starts (the hook, pack-objects) run in a process group of
	// their own, killed when the request ends.
	cmd, err := h.git.Start(ctx, gitcmd.Cmd{Args: args, Env: env, Stdin: bytes.NewReader(body)})
	if err != nil {
		h.cfg.Log.Error("serve: start git upload-pack", "err", err)
		fail(w, http.StatusInternalServerError, "internal error: git did not start")
		return false
	}
	// Nothing git started outlives the request: a hook waiting for a cache entry,
	// a pack-objects whose reader went away.
	defer func() {
		cancel()
		_ = cmd.Wait()
	}()
	out := cmd.Stdout

	// The status waits for git's first bytes: a request git refuses before it says
	// anything is a 400 with git's own words, not a 200 with an empty body.
	buf := make([]byte, 64<<10)
	n, _ := io.ReadAtLeast(out, buf, 1)
	if n == 0 {
		werr := cmd.Wait()
		msg := firstLine(cmd.StderrText())
		if werr == nil {
			msg = "no output"
		}
		h.cfg.Log.Warn("serve: git upload-pack refused a request", "repo", req.rel, "err", werr, "stderr", msg)
		fail(w, http.StatusBadRequest, "git upload-pack refused the request: "+msg)
		return false
	}
	hd := w.Header()
	noCache(hd)
	rc := http.NewResponseController(w)
	write := func(p []byte) error {
		_ = rc.SetWriteDeadline(time.Now().Add(h.cfg.IdleTimeout))
		if _, err := w.Write(p); err != nil {
			return err
		}
		return rc.Flush()
	}
	if req.svc == svcInfoRefs {
		hd.Set("Content-Type", "application/x-git-upload-pack-advertisement")
		w.WriteHeader(http.StatusOK)
		if !strings.HasPrefix(proto, "version=2") && !strings.Contains(proto, ":version=2") {
			// v0/v1 smart clients expect the service line before the advertisement.
			if err := write(append(pktLine("# service=git-upload-pack\n"), "0000"...)); err != nil {
				cancel()
			}
		}
	} else {
		hd.Set("Content-Type", "application/x-git-upload-pack-result")
		w.WriteHeader(http.StatusOK)
	}
	if fill != nil {
		res := fill.Run(io.MultiReader(bytes.NewReader(buf[:n]), out), writerFunc(write), cmd.Wait, cancel)
		if res.GenErr != nil && ctx.Err() == nil {
			h.cfg.Log.Warn("serve: git upload-pack failed mid-response", "repo", req.rel, "err", res.GenErr, "stderr", firstLine(cmd.StderrText()))
		}
		return res.WriteErr == nil && res.GenErr == nil
	}
	sent := stream(out, buf[:n], write)
	if sent != nil {
		cancel() // the client went away or stopped reading: stop git
	}
	werr := cmd.Wait()
	if werr != nil && ctx.Err() == nil {
		h.cfg.Log.Warn("serve: git upload-pack failed mid-response", "repo", req.rel, "err", werr, "stderr", firstLine(cmd.StderrText()))
	}
	return sent == nil && werr == nil
}

// uploadPackArgs is git's command line for upload-pack up to the directory, with the
// command-line configuration (the mirrors are never written to): partial clone, lazy
// fetches of single objects by v0 clients (v2 allows them anyway), and the hook (""
// for none), which git takes only from protected configuration such as -c. Not
// uploadpack.allowRefInWant: git 2.39's client fails a shallow clone with it. The
// clone detector parses requests as upload-pack does with this configuration.
func uploadPackArgs(hook string) []string {
	args := []string{
		"-c", "uploadpack.allowFilter=true",
		"-c", "uploadpack.allowAnySHA1InWant=true",
		"-c", "safe.directory=*",
	}
	if hook != "" {
		args = append(args, "-c", "uploadpack.packObjectsHook="+hook)
	}
	return append(args, "upload-pack", "--strict", "--stateless-rpc")
}

// writerFunc is an io.Writer made of a function that writes all of p or fails.
type writerFunc func(p []byte) error

func (f writerFunc) Write(p []byte) (int, error) {
	if err := f(p); err != nil {
		return 0, err
	}
	return len(p), nil
}

// noCache sets the headers that keep proxies from caching a response (as git's
// http-backend does).
func noCache(hd http.Header) {
	hd.Set("Expires", "Fri, 01 Jan 1980 00:00:00 GMT")
	hd.Set("Pragma", "no-cache")
	hd.Set("Cache-Control", "no-cache, max-age=0, must-revalidate")
}

// setResultHeaders are the headers of an upload-pack result.
func setResultHeaders(hd http.Header) {
	noCache(hd)
	hd.Set("Content-Type", "application/x-git-upload-pack-result")
}

// Sizes of the response stream's pieces: what git writes is read in readChunk pieces,
// and what arrived while the previous write was under way goes out together, up to
// maxBatch bytes.
const (
	readChunk = 64 << 10
	maxBatch  = 512 << 10
)

// stream copies git's output to the client, first the bytes already read. A reader
// keeps reading while a write to the client is under way, and the next write takes
// everything that arrived meanwhile: upload-pack writes 8 KiB at a time, and a
// socket write with a flush per 8 KiB costs more CPU than the rest of serving a
// cached pack. Nothing waits for more data than there is, so progress and keepalive
// packets still go out at once.
func stream(out io.Reader, first []byte, write func([]byte) error) error {
	chunks := make(chan []byte, 8)
	free := make(chan []byte, 10)
	done := make(chan struct{})
	defer close(done)
	go func() {
		defer close(chunks)
		for {
			var b []byte
			select {
			case b = <-free:
			default:
				b = make([]byte, readChunk)
			}
			n, err := out.Read(b[:readChunk])
			if n > 0 {
				select {
				case chunks <- b[:n]:
				case <-done:
					return
				}
			}
			if err != nil {
				return
			}
		}
	}()
	batch := append(make([]byte, 0, maxBatch+readChunk), first...)
	for {
		open := true
	gather:
		for len(batch) < maxBatch {
			select {
			case b, ok := <-chunks:
				if !ok {
					open = false
					break gather
				}
				batch = append(batch, b...)
				select {
				case free <- b:
				default:
				}
			default:
				break gather
			}
		}
		if len(batch) > 0 {
			if err := write(batch); err != nil {
				return err
			}
		}
		if !open {
			return nil
		}
		b, ok := <-chunks // wait for git's next bytes
		if !ok {
			return nil
		}
		batch = append(batch[:0], b...)
		select {
		case free <- b:
		default:
		}
	}
}

// scratchDir makes a git directory for one request whose common directory is the
// mirror: refs, objects and config come from the mirror, HEAD is a copy, and the
// files git writes (a shallow clone's temporary shallow file) land here.
func (h *Handler) scratchDir(dir string) (string, error) {
	d, err := os.MkdirTemp(h.cfg.Scratch, "mf-req-")
	if err != nil {
		return "", err
	}
	head, err := os.ReadFile(filepath.Join(dir, "HEAD"))
	if err == nil {
		err = os.WriteFile(filepath.Join(d, "HEAD"), head, 0o644)
	}
	if err == nil {
		err = os.WriteFile(filepath.Join(d, "commondir"), []byte(dir+"\n"), 0o644)
	}
	if err != nil {
		os.RemoveAll(d)
		return "", err
	}
	return d, nil
}

// Guard puts next (such as /metrics) under the front's token and allowed networks.
func (h *Handler) Guard(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if h.authorized(w, r) {
			next.ServeHTTP(w, r)
		}
	})
}

func (h *Handler) authorized(w http.ResponseWriter, r *http.Request) bool {
	if h.cfg.Token == "" && len(h.cfg.Allow) == 0 {
		return true
	}
	if len(h.cfg.Allow) > 0 {
		if ap, err := netip.ParseAddrPort(r.RemoteAddr); err == nil {
			for _, p := range h.cfg.Allow {
				if p.Contains(ap.Addr().Unmap()) {
					return true
				}
			}
		}
		if h.cfg.Token == "" {
			fail(w, http.StatusForbidden, "your address may not read from this server")
			return false
		}
	}
	var got string
	if _, pw, ok := r.BasicAuth(); ok {
		got = pw
	} else if scheme, tok, ok := strings.Cut(r.Header.Get("Authorization"), " "); ok && strings.EqualFold(scheme, "Bearer") {
		got = strings.TrimSpace(tok)
	}
	sum := sha256.Sum256([]byte(got))
	if got != "" && subtle.ConstantTimeCompare(sum[:], h.tokenSum[:]) == 1 {
		return true
	}
	w.Header().Set("WWW-Authenticate", `Basic realm="mirrorfleet"`)
	fail(w, http.StatusUnauthorized, "this server needs a token to read: use it as the password (any user name)")
	return false
}

func (h *Handler) reject(w http.ResponseWriter, status int, msg string) {
	w.Header().Set("Retry-After", strconv.Itoa(int((h.cfg.RetryAfter+time.Second-1)/time.Second)))
	fail(w, status, msg)
}

// fail answers with a plain-text message: git shows it to its user.
func fail(w http.ResponseWriter, status int, msg string) {
	h := w.Header()
	h.Set("Content-Type", "text/plain; charset=utf-8")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Cache-Control", "no-cache")
	w.WriteHeader(status)
	io.WriteString(w, msg+"\n")
}

func truncate(s string, n int) string {
	if len(s) > n {
		return s[:n] + "…"
	}
	return s
}

func firstLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = s[:i]
	}
	return truncate(s, 300)
}

// recorder notes a response's status and bytes for the metrics.
type recorder struct {
	http.ResponseWriter
	status int
	bytes  int64
}

func (r *recorder) WriteHeader(code int) {
	if r.status == 0 {
		r.status = code
	}
	r.ResponseWriter.WriteHeader(code)
}

func (r *recorder) Write(p []byte) (int, error) {
	if r.status == 0 {
		r.status = http.StatusOK
	}
	n, err := r.ResponseWriter.Write(p)
	r.bytes += int64(n)
	return n, err
}

// ReadFrom lets a copy from a file reach the connection's sendfile.
func (r *recorder) ReadFrom(src io.Reader) (int64, error) {
	if r.status == 0 {
		r.status = http.StatusOK
	}
	var n int64
	var err error
	if rf, ok := r.ResponseWriter.(io.ReaderFrom); ok {
		n, err = rf.ReadFrom(src)
	} else {
		n, err = io.Copy(struct{ io.Writer }{r.ResponseWriter}, src)
	}
	r.bytes += n
	return n, err
}

// Unwrap lets http.ResponseController reach the connection (deadlines, flushes).
func (r *recorder) Unwrap() http.ResponseWriter { return r.ResponseWriter }

func (h *Handler) recordRequest(r *recorder) {
	if h.cfg.Metrics == nil {
		return
	}
	status := r.status
	if status == 0 {
		status = http.StatusOK
	}
	_ = h.cfg.Metrics.Record(metrics.ServeRequest(status, r.bytes)...)
}

func (h *Handler) recordCache(rep packcache.Report) {
	h.cfg.PackCache.Index.Note(rep)
	if rep.Result == packcache.Filling {
		return
	}
	if rep.Note != "" {
		h.cfg.Log.Warn("serve: pack cache bypassed", "reason", rep.Note)
	}
	if h.cfg.Metrics == nil {
		return
	}
	_ = h.cfg.Metrics.Record(metrics.PackCache(rep.Result == packcache.Hit || rep.Result == packcache.Waited, rep.GenerationSeconds)...)
}
