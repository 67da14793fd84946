// Package gittest runs real git for tests: upstream repositories built with the git CLI
// and served over smart HTTP by `git http-backend` (behind net/http/cgi) on 127.0.0.1,
// every git command in an isolated environment (its own HOME, no system or global
// config, a fixed author and committer, deterministic commit dates).
//
//	srv := gittest.NewServer(t)
//	up := srv.NewRepo(t, "team/app")          // served at srv.URL + "/team/app"
//	up.Commit(t, "init", map[string][]byte{"README": []byte("hi\n")})
//	up.AnnotatedTag(t, "v1.0", "HEAD", "release 1.0")
//	... mirror up.URL() ...
//	if got, want := gittest.RefsOf(t, mirrorDir), up.Refs(t); got != want { ... }
//
// A test that needs git or git http-backend and does not find them is skipped, with a
// message naming what is missing. Outside of tests, Serve starts the same server over
// a directory of repositories and reports what is missing as an error.
package gittest

import (
	"bytes"
	"crypto/rand"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/cgi"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// Author is the fixed author and committer of every commit the package makes.
const (
	AuthorName  = "Up Stream"
	AuthorEmail = "up@example.com"
)

// CommitBase is the date of a repo's commit number 0; commit n is n hours later, so
// commit dates are deterministic and increase.
var CommitBase = time.Date(2024, 3, 1, 12, 0, 0, 0, time.UTC)

// Env is the isolated environment every git command of the package runs in: the
// caller's environment without any GIT_* variable, HOME set to home (os.DevNull when
// empty: git reads no user config from there), no system or global config, the fixed
// author and committer, and no terminal prompts.
func Env(home string) []string {
	if home == "" {
		home = os.DevNull
	}
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "GIT_") && !strings.HasPrefix(kv, "HOME=") && !strings.HasPrefix(kv, "XDG_CONFIG_HOME=") {
			env = append(env, kv)
		}
	}
	return append(env,
		"HOME="+home,
		"GIT_CONFIG_NOSYSTEM=1",
		"GIT_CONFIG_GLOBAL="+os.DevNull,
		"GIT_TERMINAL_PROMPT=0",
		"GIT_AUTHOR_NAME="+AuthorName, "GIT_AUTHOR_EMAIL="+AuthorEmail,
		"GIT_COMMITTER_NAME="+AuthorName, "GIT_COMMITTER_EMAIL="+AuthorEmail,
	)
}

// Run runs git with args in dir (the current directory when empty) in Env(home) plus
// extraEnv, and returns its standard output with surrounding space trimmed. It fails
// the test, with git's standard error, if git fails.
func Run(t testing.TB, home, dir string, extraEnv []string, args ...string) string {
	t.Helper()
	out, err := run(home, dir, extraEnv, nil, args...)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// RunStdin is Run with stdin as git's standard input.
func RunStdin(t testing.TB, home, dir string, stdin string, args ...string) string {
	t.Helper()
	out, err := run(home, dir, nil, strings.NewReader(stdin), args...)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func run(home, dir string, extraEnv []string, stdin io.Reader, args ...string) (string, error) {
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	cmd.Env = append(Env(home), extraEnv...)
	cmd.Stdin = stdin
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("git %s (in %s): %v\n%s", strings.Join(args, " "), dir, err, stderr.String())
	}
	return strings.TrimSpace(string(out)), nil
}

// RefsOf is `git for-each-ref --format='%(objectname) %(refname)'` of the repository
// at gitDir (bare, or the .git of a working tree): every ref, sorted by name, one a
// line; "" for a repository without refs. Two repositories with the same RefsOf have
// the same refs pointing at the same objects.
func RefsOf(t testing.TB, gitDir string) string {
	t.Helper()
	return Run(t, "", "", nil, "--git-dir="+gitDir, "for-each-ref", "--format=%(objectname) %(refname)")
}

// Fsck runs `git fsck --full` on the repository at gitDir and fails the test on any
// error or missing object.
func Fsck(t testing.TB, gitDir string) {
	t.Helper()
	cmd := exec.Command("git", "--git-dir="+gitDir, "fsck", "--full", "--no-dangling")
	cmd.Env = Env("")
	out, err := cmd.CombinedOutput()
	if err != nil || strings.Contains(string(out), "error") || strings.Contains(string(out), "missing") {
		t.Fatalf("git fsck %s: %v\n%s", gitDir, err, out)
	}
}

// RandomBytes returns n random bytes: binary content that does not compress or delta.
func RandomBytes(t testing.TB, n int) []byte {
	t.Helper()
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return b
}

// BackendPath returns the path of git http-backend, or an error naming what is
// missing (git itself, or its http-backend).
func BackendPath() (string, error) {
	if _, err := exec.LookPath("git"); err != nil {
		return "", fmt.Errorf("git is not installed (not on PATH): %w", err)
	}
	out, err := exec.Command("git", "--exec-path").Output()
	if err != nil {
		return "", fmt.Errorf("git --exec-path failed, so git http-backend cannot be found: %w", err)
	}
	p := filepath.Join(strings.TrimSpace(string(out)), "git-http-backend")
	if _, err := os.Stat(p); err != nil {
		return "", fmt.Errorf("git http-backend is not installed (%w); it comes with git (Debian/Ubuntu: package git)", err)
	}
	return p, nil
}

// Require skips the test unless git and git http-backend are installed, and returns
// the path of git-http-backend.
func Require(t testing.TB) string {
	t.Helper()
	p, err := BackendPath()
	if err != nil {
		t.Skip(err)
	}
	return p
}

// Server serves every repository under Root over smart HTTP with `git http-backend`
// on 127.0.0.1, and logs every request it gets.
type Server struct {
	URL  string           // http://127.0.0.1:<port>, no trailing slash
	Root string           // GIT_PROJECT_ROOT: <Root>/<name> is served at URL/<name>
	Home string           // HOME of the backend and of every git command on the server's repos
	HTTP *httptest.Server // the underlying server
	work string           // working trees of NewRepo, outside Root
	icpt atomic.Pointer[Interceptor]

	mu   sync.Mutex
	reqs []string
}

// Interceptor sees every request before git http-backend does: it may answer it
// itself, or call next (possibly with a wrapped ResponseWriter).
type Interceptor func(w http.ResponseWriter, r *http.Request, next http.Handler)

// NewServer starts a server, closed when the test ends. It skips the test if git or git
// http-backend is missing.
func NewServer(t testing.TB) *Server {
	t.Helper()
	s := serve(Require(t), t.TempDir(), t.TempDir(), t.TempDir())
	t.Cleanup(s.HTTP.Close)
	return s
}

// Serve starts a server for the repositories under root outside of any test (a
// benchmark program, say). Its Home and the working trees of NewRepo go to new
// temporary directories; stop removes them and stops the server, leaving root alone.
func Serve(root string) (s *Server, stop func(), err error) {
	backendPath, err := BackendPath()
	if err != nil {
		return nil, nil, err
	}
	if root, err = filepath.Abs(root); err != nil {
		return nil, nil, fmt.Errorf("gittest: root: %w", err)
	}
	if fi, err := os.Stat(root); err != nil || !fi.IsDir() {
		return nil, nil, fmt.Errorf("gittest: root %s is not a directory: %w", root, err)
	}
	scratch, err := os.MkdirTemp("", "gittest-server-")
	if err != nil {
		return nil, nil, fmt.Errorf("gittest: %w", err)
	}
	home, work := filepath.Join(scratch, "home"), filepath.Join(scratch, "work")
	for _, d := range []string{home, work} {
		if err := os.Mkdir(d, 0o755); err != nil {
			os.RemoveAll(scratch)
			return nil, nil, fmt.Errorf("gittest: %w", err)
		}
	}
	s = serve(backendPath, root, home, work)
	return s, func() {
		s.HTTP.Close()
		os.RemoveAll(scratch)
	}, nil
}

// serve starts the HTTP server in front of git http-backend at backendPath.
func serve(backendPath, root, home, work string) *Server {
	s := &Server{Root: root, Home: home, work: work}
	backend := &cgi.Handler{
		Path: backendPath,
		Env: []string{
			"GIT_PROJECT_ROOT=" + s.Root,
			"GIT_HTTP_EXPORT_ALL=1",
			"HOME=" + s.Home,
			"GIT_CONFIG_NOSYSTEM=1",
			"GIT_CONFIG_GLOBAL=" + os.DevNull,
		},
		Logger: log.New(io.Discard, "", 0), // "copy error" when a client cuts a transfer
		Stderr: io.Discard,                 // http-backend's "Not a git repository" for a 404
	}
	s.HTTP = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		s.reqs = append(s.reqs, r.Method+" "+r.URL.RequestURI())
		s.mu.Unlock()
		if f := s.icpt.Load(); f != nil {
			(*f)(w, r, backend)
			return
		}
		backend.ServeHTTP(w, r)
	}))
	s.URL = s.HTTP.URL
	return s
}

// Intercept installs f in front of git http-backend (nil removes it).
func (s *Server) Intercept(f Interceptor) {
	if f == nil {
		s.icpt.Store(nil)
		return
	}
	s.icpt.Store(&f)
}

// Requests returns the requests served so far, as "METHOD /path?query".
func (s *Server) Requests() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.reqs...)
}

// ResetRequests forgets the requests served so far.
func (s *Server) ResetRequests() {
	s.mu.Lock()
	s.reqs = nil
	s.mu.Unlock()
}

// Repo is an upstream repository: a working tree (Dir) whose every change is
// published to the repository the server serves at URL(). Methods fail the test on
// any git error. A Repo is not safe for concurrent use.
type Repo struct {
	Server *Server
	Name   string // path under the server: URL() is Server.URL + "/" + Name
	Dir    string // the working tree
	// Bare is the served bare repository that every change is pushed to; "" for a
	// repo from NewWorkRepo, whose working tree is served itself.
	Bare string
	n    int // commits made: the next one is dated CommitBase + (n+1) hours
}

// NewRepo creates an empty repository served at Server.URL+"/"+name: a bare repository
// under Root (HEAD refs/heads/main), and a working tree elsewhere whose changes the
// methods push to it (`git push --mirror`, so deletions and rewrites are forced) with
// HEAD kept in step. Until the first commit it is an empty repository.
func (s *Server) NewRepo(t testing.TB, name string) *Repo {
	t.Helper()
	r := &Repo{Server: s, Name: name, Dir: filepath.Join(s.work, name), Bare: filepath.Join(s.Root, name)}
	Run(t, s.Home, "", nil, "init", "-q", "--bare", "-b", "main", r.Bare)
	// Publish deletes whatever the working tree no longer has, HEAD's branch included.
	Run(t, s.Home, "", nil, "--git-dir="+r.Bare, "config", "receive.denyDeleteCurrent", "ignore")
	Run(t, s.Home, "", nil, "init", "-q", "-b", "main", r.Dir)
	return r
}

// NewWorkRepo creates an empty working repository that is itself served at
// Server.URL+"/"+name (http-backend serves a working tree's .git). Every change in
// Dir — also one made by running git there directly, a HEAD moved by a checkout, refs
// written with update-ref — is visible upstream at once; there is nothing to publish.
func (s *Server) NewWorkRepo(t testing.TB, name string) *Repo {
	t.Helper()
	r := &Repo{Server: s, Name: name, Dir: filepath.Join(s.Root, name)}
	Run(t, s.Home, "", nil, "init", "-q", "-b", "main", r.Dir)
	return r
}

// URL is the repository's URL on the server.
func (r *Repo) URL() string { return r.Server.URL + "/" + r.Name }

// Served is the git directory the server serves.
func (r *Repo) Served() string {
	if r.Bare != "" {
		return r.Bare
	}
	return filepath.Join(r.Dir, ".git")
}

// Git runs git with args in the working tree, publishes the result, and returns git's
// output (trimmed).
func (r *Repo) Git(t testing.TB, args ...string) string {
	t.Helper()
	out := r.git(t, nil, args...)
	r.Publish(t)
	return out
}

// Out runs a git command that changes nothing (rev-parse, log, ...) in the working tree
// and returns its output, without publishing.
func (r *Repo) Out(t testing.TB, args ...string) string {
	t.Helper()
	return r.git(t, nil, args...)
}

func (r *Repo) git(t testing.TB, env []string, args ...string) string {
	t.Helper()
	return Run(t, r.Server.Home, r.Dir, env, args...)
}

// Publish makes the served repository equal to the working tree: every ref (pushed
// with --mirror: new, moved, rewritten and deleted refs alike) and HEAD. It is called
// by every method that changes the repository.
func (r *Repo) Publish(t testing.TB) {
	t.Helper()
	if r.Bare == "" {
		return
	}
	home := r.Server.Home
	if _, err := run(home, r.Dir, nil, nil, "push", "-q", "--mirror", r.Bare); err != nil {
		// git refuses a mirror push from a repository without refs ("No refs in common
		// and none specified"): empty the served repository by hand.
		if r.git(t, nil, "for-each-ref", "--count=1") != "" {
			t.Fatal(err)
		}
		var del strings.Builder
		for _, ref := range strings.Fields(Run(t, home, "", nil, "--git-dir="+r.Bare, "for-each-ref", "--format=%(refname)")) {
			fmt.Fprintf(&del, "delete %s\n", ref)
		}
		if del.Len() > 0 {
			RunStdin(t, home, "", del.String(), "--git-dir="+r.Bare, "update-ref", "--stdin")
		}
	}
	// HEAD: the served repository's default branch follows the working tree's checkout
	// (a detached working tree leaves it alone).
	head, err := os.ReadFile(filepath.Join(r.Dir, ".git", "HEAD"))
	if err != nil {
		t.Fatal(err)
	}
	ref, ok := strings.CutPrefix(strings.TrimSpace(string(head)), "ref: ")
	if !ok {
		return
	}
	served, err := os.ReadFile(filepath.Join(r.Bare, "HEAD"))
	if err != nil {
		t.Fatal(err)
	}
	if strings.TrimSpace(string(served)) != "ref: "+ref {
		Run(t, home, "", nil, "--git-dir="+r.Bare, "symbolic-ref", "HEAD", ref)
	}
}

// WriteFiles writes files (path relative to the working tree: content) without
// committing them.
func (r *Repo) WriteFiles(t testing.TB, files map[string][]byte) {
	t.Helper()
	for name, data := range files {
		p := filepath.Join(r.Dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// nextDate is the environment dating the next commit (author and committer).
func (r *Repo) nextDate() []string {
	r.n++
	ts := strconv.FormatInt(CommitBase.Add(time.Duration(r.n)*time.Hour).Unix(), 10) + " +0000"
	return []string{"GIT_COMMITTER_DATE=" + ts, "GIT_AUTHOR_DATE=" + ts}
}

// Commit writes files (any bytes: text or binary), commits everything in the working
// tree on the current branch (an empty commit if nothing changed), publishes, and
// returns the new commit's hash.
func (r *Repo) Commit(t testing.TB, msg string, files map[string][]byte) string {
	t.Helper()
	r.WriteFiles(t, files)
	r.git(t, nil, "add", "-A")
	r.git(t, r.nextDate(), "commit", "-q", "--allow-empty", "-m", msg)
	r.Publish(t)
	return r.Head(t)
}

// Head is the hash of the working tree's HEAD commit.
func (r *Repo) Head(t testing.TB) string {
	t.Helper()
	return r.git(t, nil, "rev-parse", "HEAD")
}

// Checkout switches the working tree to branch (which must exist) and publishes, so
// the served HEAD follows.
func (r *Repo) Checkout(t testing.TB, branch string) {
	t.Helper()
	r.git(t, nil, "checkout", "-q", branch)
	r.Publish(t)
}

// CheckoutNew creates branch at HEAD and switches to it.
func (r *Repo) CheckoutNew(t testing.TB, branch string) {
	t.Helper()
	r.git(t, nil, "checkout", "-q", "-b", branch)
	r.Publish(t)
}

// Branch creates (or moves) branch to start ("" for HEAD).
func (r *Repo) Branch(t testing.TB, branch, start string) {
	t.Helper()
	args := []string{"branch", "-f", branch}
	if start != "" {
		args = append(args, start)
	}
	r.git(t, nil, args...)
	r.Publish(t)
}

// DeleteBranch deletes branch (merged or not).
func (r *Repo) DeleteBranch(t testing.TB, branch string) {
	t.Helper()
	r.git(t, nil, "branch", "-q", "-D", branch)
	r.Publish(t)
}

// Tag creates a lightweight tag of target ("" for HEAD; any object name).
func (r *Repo) Tag(t testing.TB, name, target string) {
	t.Helper()
	args := []string{"tag", name}
	if target != "" {
		args = append(args, target)
	}
	r.git(t, nil, args...)
	r.Publish(t)
}

// AnnotatedTag creates an annotated tag object for target ("" for HEAD) with msg.
func (r *Repo) AnnotatedTag(t testing.TB, name, target, msg string) {
	t.Helper()
	args := []string{"tag", "-a", name, "-m", msg}
	if target != "" {
		args = append(args, target)
	}
	r.git(t, r.nextDate(), args...)
	r.Publish(t)
}

// DeleteTag deletes a tag.
func (r *Repo) DeleteTag(t testing.TB, name string) {
	t.Helper()
	r.git(t, nil, "tag", "-d", name)
	r.Publish(t)
}

// Merge merges branch into the current branch with a merge commit (--no-ff) and
// returns its hash.
func (r *Repo) Merge(t testing.TB, branch string) string {
	t.Helper()
	r.git(t, r.nextDate(), "merge", "-q", "--no-ff", "-m", "merge "+branch, branch)
	r.Publish(t)
	return r.Head(t)
}

// Rewrite rewrites history as a force-push does: branch is reset back commits
// (branch~back), a new commit with files is made on it, and the result replaces the
// served branch. It returns the branch's old and new hashes; the old tip is no longer
// reachable from the branch. The working tree ends on the branch it was on.
func (r *Repo) Rewrite(t testing.TB, branch string, back int, msg string, files map[string][]byte) (oldHash, newHash string) {
	t.Helper()
	cur, _ := run(r.Server.Home, r.Dir, nil, nil, "symbolic-ref", "-q", "--short", "HEAD") // "" when detached
	oldHash = r.git(t, nil, "rev-parse", "refs/heads/"+branch)
	r.git(t, nil, "checkout", "-q", branch)
	r.git(t, nil, "reset", "-q", "--hard", fmt.Sprintf("%s~%d", oldHash, back))
	r.WriteFiles(t, files)
	r.git(t, nil, "add", "-A")
	r.git(t, r.nextDate(), "commit", "-q", "--allow-empty", "-m", msg)
	newHash = r.git(t, nil, "rev-parse", "HEAD")
	if cur != "" && cur != branch {
		r.git(t, nil, "checkout", "-q", cur)
	}
	r.Publish(t)
	return oldHash, newHash
}

// AddManyRefs creates branches refs/heads/<prefix>NNN and tags refs/tags/<prefix>NNN
// (lightweight) spread over the last few commits of HEAD, in one ref transaction. HEAD
// must have a commit.
func (r *Repo) AddManyRefs(t testing.TB, prefix string, branches, tags int) {
	t.Helper()
	hashes := strings.Fields(r.git(t, nil, "rev-list", "--max-count=8", "HEAD"))
	var b strings.Builder
	for i := range branches {
		fmt.Fprintf(&b, "create refs/heads/%s%04d %s\n", prefix, i, hashes[i%len(hashes)])
	}
	for i := range tags {
		fmt.Fprintf(&b, "create refs/tags/%s%04d %s\n", prefix, i, hashes[(i+1)%len(hashes)])
	}
	RunStdin(t, r.Server.Home, r.Dir, b.String(), "update-ref", "--stdin")
	r.Publish(t)
}

// Refs is RefsOf the served repository: what a perfect mirror of it has.
func (r *Repo) Refs(t testing.TB) string {
	t.Helper()
	return RefsOf(t, r.Served())
}

// NewestCommit is the newest committer date over the commits the refs point to
// (annotated tags peeled), computed by git; zero without refs.
func (r *Repo) NewestCommit(t testing.TB) time.Time {
	t.Helper()
	out := Run(t, "", "", nil, "--git-dir="+r.Served(), "for-each-ref", "--format=%(committerdate:unix)%(*committerdate:unix)")
	var newest int64
	for _, l := range strings.Fields(out) {
		v, err := strconv.ParseInt(l, 10, 64)
		if err != nil {
			t.Fatalf("bad date %q", l)
		}
		newest = max(newest, v)
	}
	if newest == 0 {
		return time.Time{}
	}
	return time.Unix(newest, 0).UTC()
}

// Commits describes a run of commits for ImportCommits.
type Commits struct {
	Branch string // refs/heads/<Branch>
	// From is a revision the first commit follows; "" continues Branch's tip, or makes a
	// new root if Branch does not exist yet.
	From         string
	N            int
	Start        time.Time     // author time of the first commit
	Step         time.Duration // between author times
	CommitterLag time.Duration // committer time after author time
}

// ImportCommits writes c.N small commits with git fast-import into the repository in
// dir (a working tree or a bare repository) and moves the branch there, forced. It is
// fast enough for histories of tens of thousands of commits.
func ImportCommits(home, dir string, c Commits) error {
	from := c.From
	if from == "" {
		from, _ = run(home, dir, nil, nil, "for-each-ref", "--format=%(objectname)", "refs/heads/"+c.Branch)
	} else {
		var err error
		if from, err = run(home, dir, nil, nil, "rev-parse", from); err != nil {
			return err
		}
	}
	var b strings.Builder
	for k := range c.N {
		a := c.Start.Add(time.Duration(k) * c.Step)
		fmt.Fprintf(&b, "commit refs/heads/%s\n", c.Branch)
		fmt.Fprintf(&b, "author %s <%s> %d +0000\ncommitter %s <%s> %d +0000\n", AuthorName, AuthorEmail, a.Unix(),
			AuthorName, AuthorEmail, a.Add(c.CommitterLag).Unix())
		fmt.Fprintf(&b, "data 3\nc%d\n", k%10)
		if k == 0 && from != "" {
			fmt.Fprintf(&b, "from %s\n", from)
		}
		line := strconv.Itoa(k) + "\n"
		fmt.Fprintf(&b, "M 644 inline %s.txt\ndata %d\n%s\n", c.Branch, len(line), line)
	}
	_, err := run(home, dir, nil, strings.NewReader(b.String()), "fast-import", "--quiet", "--force")
	return err
}
