package serve

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mirrorfleet/mirrorfleet/internal/testkit/gittest"
	"github.com/mirrorfleet/mirrorfleet/shared/httpguard"
	"github.com/mirrorfleet/mirrorfleet/shared/metrics"
)

// do sends a raw request to the front and returns the status, headers and body.
func (e *env) do(method, path string, hdr map[string]string, body []byte) (int, http.Header, string) {
	e.t.Helper()
	req, err := http.NewRequest(method, e.srv.URL+path, bytes.NewReader(body))
	if err != nil {
		e.t.Fatal(err)
	}
	if strings.Contains(path, "%") || strings.Contains(path, "..") {
		req.URL.Opaque = "//" + req.URL.Host + path // keep the path exactly as written
	}
	for k, v := range hdr {
		req.Header.Set(k, v)
		if k == "Host" {
			req.Host = v // the client sends req.Host, not a Host header
		}
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		e.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header, string(b)
}

const uploadCT = "application/x-git-upload-pack-request"

// lsRefs is a well-formed v2 ls-refs request.
var lsRefs = string(pktLine("command=ls-refs\n")) + "0001" + string(pktLine("peel\n")) + "0000"

// TestBadInput sends what a hostile or broken client might and checks the answer is
// a clear 4xx, nothing outside the root is read, and nothing is written anywhere.
func TestBadInput(t *testing.T) {
	e := newEnv(t, func(c *Config) { c.MaxRequestBytes = 1 << 16 })
	e.repo("example.com/team/app.git")
	// A repository outside the root, reachable by a symlink inside it, and repos in
	// the hidden directories the fleet keeps beside the mirrors.
	outside := t.TempDir()
	gittest.Run(t, "", "", nil, "init", "-q", "--bare", filepath.Join(outside, "secret.git"))
	if err := os.Symlink(filepath.Join(outside, "secret.git"), filepath.Join(e.root, "example.com", "link.git")); err != nil {
		t.Fatal(err)
	}
	for _, hidden := range []string{".tmp", ".trash", ".locks"} {
		gittest.Run(t, "", "", nil, "init", "-q", "--bare", filepath.Join(e.root, hidden, "x", "y.git"))
	}
	before := snapshot(t, e.root)
	beforeOutside := snapshot(t, outside)

	v2 := map[string]string{"Content-Type": uploadCT, "Git-Protocol": "version=2"}
	huge := append([]byte("ffff"), bytes.Repeat([]byte("a"), 70000)...)
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	zw.Write(bytes.Repeat([]byte("0000"), 1<<16)) // 256 KiB once inflated, past the bound
	zw.Close()

	cases := []struct {
		name, method, path string
		hdr                map[string]string
		body               []byte
		status             int
		says               string
	}{
		{"traversal", "GET", "/git/example.com/../../etc/info/refs?service=git-upload-pack", nil, nil, 400, `".."`},
		{"escaped traversal", "GET", "/git/example.com/%2e%2e/%2e%2e/etc/info/refs?service=git-upload-pack", nil, nil, 400, `".."`},
		{"escaped slash", "GET", "/git/example.com%2fteam/app.git/info/refs?service=git-upload-pack", nil, nil, 400, "escaped slashes"},
		{"escaped backslash", "GET", "/git/example.com/team%5capp.git/info/refs?service=git-upload-pack", nil, nil, 400, "backslashes"},
		{"NUL", "GET", "/git/example.com/team/app%00.git/info/refs?service=git-upload-pack", nil, nil, 400, "NUL"},
		{"empty segment", "GET", "/git/example.com//team/app.git/info/refs?service=git-upload-pack", nil, nil, 400, "empty segment"},
		{"symlink out of the root", "GET", "/git/example.com/link.git/info/refs?service=git-upload-pack", nil, nil, 404, "no mirror"},
		{"hidden .tmp", "GET", "/git/.tmp/x/y.git/info/refs?service=git-upload-pack", nil, nil, 404, "hidden"},
		{"hidden .trash", "GET", "/git/.trash/x/y.git/info/refs?service=git-upload-pack", nil, nil, 404, "hidden"},
		{"hidden .locks", "GET", "/git/.locks/x/y.git/info/refs?service=git-upload-pack", nil, nil, 404, "hidden"},
		{"unknown repo", "GET", "/git/example.com/team/nope.git/info/refs?service=git-upload-pack", nil, nil, 404, "no mirror"},
		{"receive-pack advertisement", "GET", "/git/example.com/team/app.git/info/refs?service=git-receive-pack", nil, nil, 403, "read-only"},
		{"receive-pack", "POST", "/git/example.com/team/app.git/git-receive-pack", map[string]string{"Content-Type": "application/x-git-receive-pack-request"}, []byte("0000"), 403, "read-only"},
		{"unknown service", "GET", "/git/example.com/team/app.git/info/refs?service=git-upload-archive", nil, nil, 400, "unknown service"},
		{"dumb info/refs", "GET", "/git/example.com/team/app.git/info/refs", nil, nil, 403, "dumb"},
		{"dumb HEAD", "GET", "/git/example.com/team/app.git/HEAD", nil, nil, 404, "dumb"},
		{"dumb objects", "GET", "/git/example.com/team/app.git/objects/info/packs", nil, nil, 404, "dumb"},
		{"dumb config", "GET", "/git/example.com/team/app.git/config", nil, nil, 404, "smart-HTTP"},
		{"GET upload-pack", "GET", "/git/example.com/team/app.git/git-upload-pack", nil, nil, 405, "POST"},
		{"POST info/refs", "POST", "/git/example.com/team/app.git/info/refs?service=git-upload-pack", nil, nil, 405, "GET"},
		{"wrong content type", "POST", "/git/example.com/team/app.git/git-upload-pack", map[string]string{"Content-Type": "text/plain"}, []byte(lsRefs), 415, "Content-Type"},
		{"empty body", "POST", "/git/example.com/team/app.git/git-upload-pack", v2, nil, 400, "empty"},
		{"pkt-line not hex", "POST", "/git/example.com/team/app.git/git-upload-pack", v2, []byte("zzzzcommand=ls-refs\n0000"), 400, "hex"},
		{"pkt-line 0003", "POST", "/git/example.com/team/app.git/git-upload-pack", v2, []byte("0003"), 400, "0003"},
		{"pkt-line too long", "POST", "/git/example.com/team/app.git/git-upload-pack", v2, huge, 413, "over"},
		{"pkt-line over the maximum", "POST", "/git/example.com/team/app.git/git-upload-pack", v2, append([]byte("fff1"), bytes.Repeat([]byte("a"), 65600)...), 413, "over"},
		{"pkt-line cut short", "POST", "/git/example.com/team/app.git/git-upload-pack", v2, []byte("0020command=ls"), 400, "past the end"},
		{"pkt-line trailing bytes", "POST", "/git/example.com/team/app.git/git-upload-pack", v2, []byte("000"), 400, "4"},
		{"gzip bomb", "POST", "/git/example.com/team/app.git/git-upload-pack", map[string]string{"Content-Type": uploadCT, "Content-Encoding": "gzip"}, gz.Bytes(), 413, "over"},
		{"not gzip", "POST", "/git/example.com/team/app.git/git-upload-pack", map[string]string{"Content-Type": uploadCT, "Content-Encoding": "gzip"}, []byte(lsRefs), 400, "gzip"},
		{"unknown encoding", "POST", "/git/example.com/team/app.git/git-upload-pack", map[string]string{"Content-Type": uploadCT, "Content-Encoding": "br"}, []byte(lsRefs), 415, "gzip"},
		{"bad Git-Protocol", "GET", "/git/example.com/team/app.git/info/refs?service=git-upload-pack", map[string]string{"Git-Protocol": "version=2; rm -rf /"}, nil, 400, "Git-Protocol"},
		{"unknown v2 command", "POST", "/git/example.com/team/app.git/git-upload-pack", v2, []byte(string(pktLine("command=rm-rf\n")) + "0000"), 400, "refused"},
		{"v0 garbage", "POST", "/git/example.com/team/app.git/git-upload-pack", map[string]string{"Content-Type": uploadCT}, []byte(string(pktLine("hello there\n")) + "0000"), 400, "refused"},
		{"not under /git/", "GET", "/git/", nil, nil, 404, "no repo index"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			status, _, body := e.do(c.method, c.path, c.hdr, c.body)
			if status != c.status || !strings.Contains(body, c.says) {
				t.Fatalf("%s %s: %d %q, want %d saying %q", c.method, c.path, status, body, c.status, c.says)
			}
		})
	}
	// A want of an object the mirror lacks is git's own in-band error, which the
	// client shows as such.
	want := []byte(string(pktLine("command=fetch\n")) + "0001" + string(pktLine("want 0123456789012345678901234567890123456789\n")) + string(pktLine("done\n")) + "0000")
	if status, _, body := e.do("POST", "/git/example.com/team/app.git/git-upload-pack", v2, want); status != 200 || !strings.Contains(body, "ERR upload-pack: not our ref") {
		t.Fatalf("want of a missing object: %d %q", status, body)
	}
	if s := e.sink.total(metrics.ServeRequests + "/4xx"); s != float64(len(cases)) {
		t.Errorf("4xx requests counted %v, want %d", s, len(cases))
	}

	// git push is refused with the front's own words.
	work := filepath.Join(t.TempDir(), "w")
	e.git("", "clone", "--quiet", e.url("example.com/team/app"), work)
	e.git(work, "commit", "--allow-empty", "-qm", "pushed")
	if out, err := e.gitErr(work, "push", "origin", "HEAD:main"); err == nil || !strings.Contains(out, "403") {
		t.Fatalf("push: %v\n%s", err, out)
	}

	if after := snapshot(t, e.root); after != before {
		t.Fatalf("bad input wrote under the mirrors root:\nbefore:\n%s\nafter:\n%s", before, after)
	}
	if after := snapshot(t, outside); after != beforeOutside {
		t.Fatalf("bad input touched the directory outside the root")
	}
	if left, _ := os.ReadDir(e.h.cfg.Scratch); len(left) != 0 {
		t.Fatalf("scratch directories left behind: %v", left)
	}
}

// TestSlowClients: a client that stops sending its body gets a 408 after the read
// timeout; one that stops reading is cut after the idle timeout and its git process
// ends, while a long clone that keeps reading is never cut.
func TestSlowClients(t *testing.T) {
	e := newEnv(t, func(c *Config) {
		c.ReadTimeout = 300 * time.Millisecond
		c.IdleTimeout = 300 * time.Millisecond
		c.Hook = nil
	})
	up := e.repo("example.com/slow.git")
	for i := range 8 {
		up.Commit(t, fmt.Sprint("big ", i), map[string][]byte{fmt.Sprint("b", i): gittest.RandomBytes(t, 1<<20)})
	}

	// A body announced at 1000 bytes of which 10 come.
	conn, err := net.Dial("tcp", e.srv.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	fmt.Fprintf(conn, "POST /git/example.com/slow.git/git-upload-pack HTTP/1.1\r\nHost: x\r\nContent-Type: %s\r\nContent-Length: 1000\r\n\r\n0014command=ls", uploadCT)
	conn.SetReadDeadline(time.Now().Add(20 * time.Second))
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatalf("slow body: %v", err)
	}
	if resp.StatusCode != http.StatusRequestTimeout {
		t.Fatalf("slow body: %d, want 408", resp.StatusCode)
	}

	// A v0 clone request for the whole repo, whose response nobody reads.
	head := up.Head(t)
	req := string(pktLine("want "+head+" ofs-delta\n")) + "0000" + string(pktLine("done\n"))
	conn2, err := net.Dial("tcp", e.srv.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn2.Close()
	conn2.(*net.TCPConn).SetReadBuffer(4096)
	fmt.Fprintf(conn2, "POST /git/example.com/slow.git/git-upload-pack HTTP/1.1\r\nHost: x\r\nContent-Type: %s\r\nContent-Length: %d\r\n\r\n%s", uploadCT, len(req), req)
	// The front gives up on the connection; its place in the limiter frees.
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		running, _, _, _ := e.h.limit.InUse("")
		if running == 0 && time.Since(deadline.Add(-30*time.Second)) > time.Second {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if running, _, _, _ := e.h.limit.InUse(""); running != 0 {
		t.Fatalf("a client that stopped reading still holds %d git processes", running)
	}

	// A clone that reads steadily takes longer than the timeouts and succeeds.
	d := filepath.Join(t.TempDir(), "c.git")
	e.git("", "clone", "--mirror", "--quiet", e.url("example.com/slow.git"), d)
	gittest.Fsck(t, d)
}

// TestLimits: past the per-repo bound a request gets 429, past the server's 503,
// both with Retry-After; the places free up afterwards.
func TestLimits(t *testing.T) {
	e := newEnv(t, func(c *Config) {
		c.MaxPerRepo, c.MaxTotal = 1, 2
		c.QueueWait = 50 * time.Millisecond
		c.RetryAfter = 7 * time.Second
	})
	e.repo("example.com/one.git")
	e.repo("example.com/two.git")
	e.repo("example.com/three.git")
	dir := func(rel string) string {
		d, err := e.h.resolve(rel)
		if err != nil {
			t.Fatal(err)
		}
		return d
	}
	adv := "/info/refs?service=git-upload-pack"
	release1, why := e.h.limit.Acquire(context.Background(), "other", dir("example.com/one.git"), 0)
	if why != httpguard.Admitted {
		t.Fatal("first place refused")
	}
	status, hdr, body := e.do("GET", "/git/example.com/one.git"+adv, nil, nil)
	if status != 429 || hdr.Get("Retry-After") != "7" || !strings.Contains(body, "this repository") {
		t.Fatalf("repo busy: %d %q %q", status, hdr.Get("Retry-After"), body)
	}
	release2, _ := e.h.limit.Acquire(context.Background(), "other", dir("example.com/two.git"), 0)
	status, hdr, body = e.do("GET", "/git/example.com/three.git"+adv, nil, nil)
	if status != 503 || hdr.Get("Retry-After") != "7" || !strings.Contains(body, "server") {
		t.Fatalf("server busy: %d %q %q", status, hdr.Get("Retry-After"), body)
	}
	if out, err := e.gitErr("", "ls-remote", e.url("example.com/three.git")); err == nil || !strings.Contains(out, "503") {
		t.Fatalf("git ls-remote on a busy server: %v %s", err, out)
	}
	release1()
	release2()
	if out, err := e.gitErr("", "ls-remote", e.url("example.com/three.git")); err != nil {
		t.Fatalf("after the places freed: %v %s", err, out)
	}
	if got := e.sink.total(metrics.ServeRejected); got != 3 {
		t.Fatalf("ServeRejected = %v, want 3", got)
	}
}

// TestToken: with a serve token set, git needs it (as the password); an allow-listed
// network reads without it.
func TestToken(t *testing.T) {
	e := newEnv(t, func(c *Config) { c.Token = "s3cret" })
	e.repo("example.com/private.git")
	if out, err := e.gitErr("", "ls-remote", e.url("example.com/private.git")); err == nil || !strings.Contains(out, "401") && !strings.Contains(out, "Authentication failed") && !strings.Contains(out, "could not read Username") {
		t.Fatalf("ls-remote without the token: %v %s", err, out)
	}
	withTok := strings.Replace(e.url("example.com/private.git"), "http://", "http://any:s3cret@", 1)
	if out, err := e.gitErr("", "ls-remote", withTok); err != nil {
		t.Fatalf("ls-remote with the token: %v %s", err, out)
	}
	wrong := strings.Replace(e.url("example.com/private.git"), "http://", "http://any:wrong@", 1)
	if _, err := e.gitErr("", "ls-remote", wrong); err == nil {
		t.Fatal("a wrong token was accepted")
	}
	if status, _, _ := e.do("GET", "/git/example.com/private.git/info/refs?service=git-upload-pack", map[string]string{"Authorization": "Bearer s3cret"}, nil); status != 200 {
		t.Fatalf("bearer token: %d", status)
	}

	allowed := newEnv(t, func(c *Config) { c.Allow = []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")} })
	allowed.repo("example.com/p.git")
	if out, err := allowed.gitErr("", "ls-remote", allowed.url("example.com/p.git")); err != nil {
		t.Fatalf("allow-listed client: %v %s", err, out)
	}
	denied := newEnv(t, func(c *Config) { c.Allow = []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")} })
	denied.repo("example.com/p.git")
	if status, _, body := denied.do("GET", "/git/example.com/p.git/info/refs?service=git-upload-pack", nil, nil); status != 403 {
		t.Fatalf("client outside the allow-list: %d %s", status, body)
	}
}

// cloneRequest's key leaves out who the client is (agent, session id) and keeps what
// it asks (which requests are clones: TestCloneDetectorAgreesWithUploadPack).
func TestCloneRequest(t *testing.T) {
	want := "want 1111111111111111111111111111111111111111\n"
	v2 := func(agent string, args ...string) []byte {
		return pkts(append([]string{"command=fetch\n", agent, "object-format=sha1\n", "|"}, append(args, "done\n", "")...)...)
	}
	v0 := func(caps string) []byte {
		return pkts("want 1111111111111111111111111111111111111111 "+caps+"\n", want, "", "done\n")
	}
	key := func(body []byte) string {
		t.Helper()
		proto := "version=2"
		if !bytes.Contains(body, []byte("command=")) {
			proto = ""
		}
		k, ok := cloneRequest(proto, body)
		if !ok {
			t.Fatalf("not a clone: %q", body)
		}
		return string(k)
	}
	same := [][2][]byte{
		{v2("agent=git/2.39.5\n", want, "ofs-delta\n"), v2("agent=git/2.47.1\n", want, "ofs-delta\n")},
		{v2("agent=git/2.39.5\n", want), pkts("command=fetch\n", "agent=JGit/6\n", "object-format=sha1\n", "|", want, "done\n", "")},
		{v0("side-band-64k ofs-delta agent=git/2.39.5"), v0("side-band-64k ofs-delta agent=git/2.47.1 session-id=x")},
	}
	for k, p := range same {
		if key(p[0]) != key(p[1]) {
			t.Errorf("pair %d: keys differ though only the client does:\n%q\n%q", k, key(p[0]), key(p[1]))
		}
	}
	differ := [][2][]byte{
		{v2("agent=git/2.39\n", want, "ofs-delta\n"), v2("agent=git/2.39\n", want)},
		{v2("agent=git/2.39\n", want, "filter blob:none\n"), v2("agent=git/2.39\n", want)},
		{v2("agent=git/2.39\n", want), v2("agent=git/2.39\n", "want 2222222222222222222222222222222222222222\n")},
		{v0("side-band-64k ofs-delta agent=git/2.39"), v0("side-band ofs-delta agent=git/2.39")},
		// git splits v0 capabilities on spaces only: a tab makes one unknown capability
		{v0("side-band-64k ofs-delta agent=git/2.39"), v0("side-band-64k\tofs-delta agent=git/2.39")},
	}
	for k, p := range differ {
		if key(p[0]) == key(p[1]) {
			t.Errorf("pair %d: two different requests share a key %q", k, key(p[0]))
		}
	}
}
