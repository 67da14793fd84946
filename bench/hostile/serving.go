package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/mirrorfleet/mirrorfleet/bench/internal/repogen"
	"github.com/mirrorfleet/mirrorfleet/bench/internal/results"
)

// serveRel is the mirror the serving scenarios ask for.
const serveRel = "example.org/app.git"

// servingBench is what every serving scenario shares: the mirrorfleet binary, a
// generated mirror and its commits.
type servingBench struct {
	log        *slog.Logger
	work, root string
	binary     string
	head       string
	commits    []string // first-parent history, newest first
}

// serving attacks `mirrorfleet serve` (a process of its own, default limits, the
// loopback trusted as a proxy so each attacker can name its client address) as issue
// 23 lists: abandoned requests, one address taking every slot, a slow reader beside
// identical and dropped requests, filter spam against the cache bounds, half-sent
// requests.
func serving(ctx context.Context, log *slog.Logger, quick bool) (*results.HostileServing, error) {
	work, err := os.MkdirTemp("", "hostile-serve-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(work)
	sb := &servingBench{log: log, work: work, root: filepath.Join(work, "root")}
	sizeMB, spam, half := 35, 1500, 3000
	if quick {
		sizeMB, spam, half = 5, 150, 300
	}
	if err := sb.prepare(ctx, sizeMB); err != nil {
		return nil, err
	}
	out := &results.HostileServing{}
	out.MirrorBytes, _, _ = repogen.PackBytes(filepath.Join(sb.root, serveRel))
	for _, sc := range []struct {
		name, what string
		args       []string
		run        func(ctx context.Context, f *front, s *results.HostileServe) error
	}{
		{"abandoned", "100 fetches (each another have) sent, read for 200 ms and dropped", nil, sb.abandoned},
		{"one-address", "64 clones from one client address that never read their answers; then a clone from another address", nil, sb.oneAddress},
		{"slow-reader", "a clone read at 8 KiB/s, 31 identical clones sent and dropped; then info/refs and an identical clone", nil, sb.slowReader},
		{"filter-spam", fmt.Sprintf("%d clones differing only in filter blob:limit=N, 8 at a time, cache bound 500 files", spam),
			[]string{"--pack-cache-max-entries", "500"}, func(ctx context.Context, f *front, s *results.HostileServe) error {
				return sb.filterSpam(ctx, f, s, spam, 500)
			}},
		{"half-sent", fmt.Sprintf("%d connections sending half of a clone request and holding; then a clone", half), nil,
			func(ctx context.Context, f *front, s *results.HostileServe) error {
				return sb.halfSent(ctx, f, s, half)
			}},
	} {
		log.Info("serving attack", "name", sc.name)
		f, err := sb.start(ctx, sc.args...)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", sc.name, err)
		}
		s := results.HostileServe{Name: sc.name, What: sc.what, GitProcessesAfter: -1}
		start := time.Now()
		err = sc.run(ctx, f, &s)
		s.Seconds = time.Since(start).Seconds()
		s.FrontRSSPeakMiB = float64(procHWM(strconv.Itoa(f.cmd.Process.Pid))) / 1024
		f.stop()
		if err != nil {
			return nil, fmt.Errorf("%s: %w", sc.name, err)
		}
		out.PeakFrontRSSMiB = max(out.PeakFrontRSSMiB, s.FrontRSSPeakMiB)
		log.Info("serving attack done", "name", sc.name, "outcome", s.Outcome, "refused", s.Refused, "rss_mib", int(s.FrontRSSPeakMiB),
			"git_after", s.GitProcessesAfter, "cache_files_peak", s.CacheFilesPeak)
		out.Scenarios = append(out.Scenarios, s)
	}
	return out, nil
}

func (sb *servingBench) prepare(ctx context.Context, sizeMB int) error {
	goCmd, err := exec.LookPath("go")
	if err != nil {
		goCmd = filepath.Join(runtime.GOROOT(), "bin", "go")
	}
	sb.binary = filepath.Join(sb.work, "mirrorfleet")
	cmd := exec.CommandContext(ctx, goCmd, "build", "-o", sb.binary, "github.com/mirrorfleet/mirrorfleet/cmd/mirrorfleet")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if o, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("build: %w: %s", err, o)
	}
	gitDir := filepath.Join(sb.root, serveRel)
	if err := os.MkdirAll(filepath.Dir(gitDir), 0o755); err != nil {
		return err
	}
	if _, err := repogen.Create(ctx, gitDir, repogen.PlanFor(int64(sizeMB)<<20), 23); err != nil {
		return err
	}
	revs, err := repogen.GitOutput(ctx, "", "--git-dir="+gitDir, "rev-list", "--first-parent", "HEAD")
	if err != nil {
		return err
	}
	sb.commits = strings.Fields(revs)
	sb.head = sb.commits[0]
	return nil
}

// front is one `mirrorfleet serve` process.
type front struct {
	cmd   *exec.Cmd
	base  string // http://host:port
	url   string // the mirror's URL
	cache string
}

func (sb *servingBench) start(ctx context.Context, extra ...string) (*front, error) {
	f := &front{cache: filepath.Join(sb.work, "packcache")}
	if err := os.RemoveAll(f.cache); err != nil {
		return nil, err
	}
	tmp := filepath.Join(sb.work, "tmp") // the front's scratch directories: its git processes' cwd
	if err := os.MkdirAll(tmp, 0o755); err != nil {
		return nil, err
	}
	args := append([]string{"serve", "--root", sb.root, "--listen", "127.0.0.1:0", "--pack-cache-dir", f.cache,
		"--emf-interval", "0", "--trusted-proxy", "127.0.0.1/32"}, extra...)
	f.cmd = exec.CommandContext(ctx, sb.binary, args...)
	f.cmd.Env = append(os.Environ(), "TMPDIR="+tmp)
	f.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	f.cmd.Cancel = func() error { return syscall.Kill(-f.cmd.Process.Pid, syscall.SIGKILL) }
	pipe, err := f.cmd.StderrPipe()
	if err != nil {
		return nil, err
	}
	if err := f.cmd.Start(); err != nil {
		return nil, err
	}
	lines := bufio.NewScanner(pipe)
	for lines.Scan() {
		var l struct{ Msg, Listen string }
		if json.Unmarshal(lines.Bytes(), &l) == nil && l.Msg == "serving git" {
			f.base = "http://" + l.Listen
			f.url = f.base + "/git/" + serveRel
			break
		}
	}
	if f.base == "" {
		f.stop()
		return nil, fmt.Errorf("the front did not start (%v)", lines.Err())
	}
	go io.Copy(io.Discard, pipe)
	return f, nil
}

func (f *front) stop() {
	syscall.Kill(f.cmd.Process.Pid, syscall.SIGTERM)
	done := make(chan struct{})
	go func() { f.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(20 * time.Second):
		syscall.Kill(-f.cmd.Process.Pid, syscall.SIGKILL)
		<-done
	}
}

// procHWM is a process's peak resident set in KiB (pid: a number, or "self").
func procHWM(pid string) int64 {
	b, err := os.ReadFile("/proc/" + pid + "/status")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			n, _ := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			return n
		}
	}
	return 0
}

// gitProcesses counts the processes working for the front other than itself: those
// whose command line names the work directory (upload-pack on a scratch directory,
// the hook) or whose working directory is in it (pack-objects), children of the
// front or reparented to init alike.
func (sb *servingBench) gitProcesses(frontPid int) int {
	ents, _ := os.ReadDir("/proc")
	n := 0
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == frontPid || pid == os.Getpid() {
			continue
		}
		cmdline, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
		cwd, _ := os.Readlink(fmt.Sprintf("/proc/%d/cwd", pid))
		if bytes.Contains(cmdline, []byte(sb.work)) || strings.HasPrefix(cwd, sb.work) {
			n++
		}
	}
	return n
}

// request sends a v2 upload-pack request as client (X-Forwarded-For) and returns the
// response (body unread) or an error.
func request(ctx context.Context, f *front, client string, body []byte) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, f.url+"/git-upload-pack", bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/x-git-upload-pack-request")
	req.Header.Set("Git-Protocol", "version=2")
	req.Header.Set("X-Forwarded-For", client)
	return http.DefaultClient.Do(req)
}

// v2Fetch is a protocol v2 fetch request of want with the given extra argument lines.
func v2Fetch(want string, args ...string) []byte {
	var b bytes.Buffer
	pkt := func(l string) { fmt.Fprintf(&b, "%04x%s", len(l)+4, l) }
	pkt("command=fetch\n")
	pkt("agent=git/2.39.5\n")
	pkt("object-format=sha1\n")
	b.WriteString("0001")
	pkt("thin-pack\n")
	pkt("ofs-delta\n")
	pkt("want " + want + "\n")
	for _, a := range args {
		pkt(a + "\n")
	}
	pkt("done\n")
	b.WriteString("0000")
	return b.Bytes()
}

// honest clones from its own address and says how it went.
func honest(ctx context.Context, f *front, client string, body []byte) string {
	start := time.Now()
	resp, err := request(ctx, f, client, body)
	if err != nil {
		return "an honest clone failed: " + err.Error()
	}
	n, err := io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if err != nil {
		return fmt.Sprintf("an honest clone: %d, cut after %d bytes: %v", resp.StatusCode, n, err)
	}
	return fmt.Sprintf("an honest clone from another address: %d, %.1f MiB in %.1f s", resp.StatusCode, float64(n)/(1<<20), time.Since(start).Seconds())
}

func (sb *servingBench) abandoned(ctx context.Context, f *front, s *results.HostileServe) error {
	const n = 100
	var wg sync.WaitGroup
	var refused atomic.Int64
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			have := sb.commits[min(len(sb.commits)-1, (i+1)*len(sb.commits)/(n+1))]
			rctx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
			defer cancel()
			resp, err := request(rctx, f, fmt.Sprintf("10.1.%d.%d", i/200, i%200+1), v2Fetch(sb.head, "have "+have))
			if err != nil {
				return // dropped before the answer's headers
			}
			defer resp.Body.Close()
			if resp.StatusCode == http.StatusTooManyRequests || resp.StatusCode == http.StatusServiceUnavailable {
				refused.Add(1)
			}
			io.Copy(io.Discard, resp.Body) // until the deadline drops it
		}()
	}
	wg.Wait()
	s.Sent, s.Refused = n, int(refused.Load())
	time.Sleep(5 * time.Second)
	s.GitProcessesAfter = sb.gitProcesses(f.cmd.Process.Pid)
	s.Outcome = fmt.Sprintf("%d git processes 5 s after the clients left", s.GitProcessesAfter)
	s.Detail = honest(ctx, f, "10.9.9.9", v2Fetch(sb.head))
	return nil
}

func (sb *servingBench) oneAddress(ctx context.Context, f *front, s *results.HostileServe) error {
	const n = 64
	actx, cancel := context.WithCancel(ctx)
	defer cancel()
	statuses := make(chan int, n)
	for range n {
		go func() {
			resp, err := request(actx, f, "10.2.0.1", v2Fetch(sb.head))
			if err != nil {
				statuses <- 0
				return
			}
			statuses <- resp.StatusCode
			<-actx.Done() // never read the answer
			resp.Body.Close()
		}()
	}
	// Every request is answered at once (a refusal) or holds a slot; the held ones
	// answer their headers as git starts.
	got := map[int]int{}
	timeout := time.After(30 * time.Second)
	for range n {
		select {
		case st := <-statuses:
			got[st]++
		case <-timeout:
			got[-1]++
		}
	}
	s.Sent, s.Refused = n, got[http.StatusTooManyRequests]+got[http.StatusServiceUnavailable]
	s.Outcome = fmt.Sprintf("%d answered 200, %d refused with 429", got[http.StatusOK], got[http.StatusTooManyRequests])
	s.Detail = honest(ctx, f, "10.2.0.2", v2Fetch(sb.head))
	cancel()
	time.Sleep(5 * time.Second)
	s.GitProcessesAfter = sb.gitProcesses(f.cmd.Process.Pid)
	return nil
}

func (sb *servingBench) slowReader(ctx context.Context, f *front, s *results.HostileServe) error {
	body := v2Fetch(sb.head)
	// The slow reader: a raw connection with a small buffer, 1 KiB every 125 ms.
	conn, err := net.Dial("tcp", strings.TrimPrefix(f.base, "http://"))
	if err != nil {
		return err
	}
	conn.(*net.TCPConn).SetReadBuffer(16 << 10)
	u, _ := url.Parse(f.url + "/git-upload-pack")
	fmt.Fprintf(conn, "POST %s HTTP/1.1\r\nHost: %s\r\nContent-Type: application/x-git-upload-pack-request\r\nGit-Protocol: version=2\r\nX-Forwarded-For: 10.3.0.1\r\nContent-Length: %d\r\n\r\n", u.Path, u.Host, len(body))
	conn.Write(body)
	var slowBytes atomic.Int64
	stop := make(chan struct{})
	go func() {
		buf := make([]byte, 1<<10)
		for {
			select {
			case <-stop:
				return
			case <-time.After(125 * time.Millisecond):
			}
			n, err := conn.Read(buf)
			slowBytes.Add(int64(n))
			if err != nil {
				return
			}
		}
	}()
	defer func() { close(stop); conn.Close() }()
	time.Sleep(time.Second)
	// 31 identical clones, sent and dropped at once.
	var wg sync.WaitGroup
	var refused atomic.Int64
	for i := range 31 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rctx, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
			defer cancel()
			if resp, err := request(rctx, f, fmt.Sprintf("10.3.1.%d", i+1), body); err == nil {
				if resp.StatusCode >= 429 {
					refused.Add(1)
				}
				resp.Body.Close()
			}
		}()
	}
	wg.Wait()
	s.Sent, s.Refused = 32, int(refused.Load())
	start := time.Now()
	resp, err := http.Get(f.url + "/info/refs?service=git-upload-pack")
	if err != nil {
		return err
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	s.Outcome = fmt.Sprintf("info/refs %d after %.2f s", resp.StatusCode, time.Since(start).Seconds())
	s.Detail = honest(ctx, f, "10.3.2.1", body) + fmt.Sprintf("; the slow reader had %d KiB", slowBytes.Load()>>10)
	close(stop)
	conn.Close()
	stop = make(chan struct{})
	time.Sleep(5 * time.Second)
	s.GitProcessesAfter = sb.gitProcesses(f.cmd.Process.Pid)
	return nil
}

func (sb *servingBench) filterSpam(ctx context.Context, f *front, s *results.HostileServe, n, bound int) error {
	s.CacheEntryBound = bound
	var next, refused, failed atomic.Int64
	var peak atomic.Int64
	done := make(chan struct{})
	go func() {
		for {
			select {
			case <-done:
				return
			case <-time.After(200 * time.Millisecond):
			}
			if c := countFiles(f.cache); int64(c) > peak.Load() {
				peak.Store(int64(c))
			}
		}
	}()
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := next.Add(1)
				if i > int64(n) {
					return
				}
				resp, err := request(ctx, f, fmt.Sprintf("10.4.0.%d", w+1), v2Fetch(sb.head, fmt.Sprintf("filter blob:limit=%d", i)))
				if err != nil {
					failed.Add(1)
					continue
				}
				if resp.StatusCode >= 429 {
					refused.Add(1)
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
			}
		}()
	}
	wg.Wait()
	close(done)
	s.CacheFilesPeak = max(int(peak.Load()), countFiles(f.cache))
	s.Sent, s.Refused = n, int(refused.Load())
	s.Outcome = fmt.Sprintf("at most %d cache files on disk for a bound of %d (%.2f×)", s.CacheFilesPeak, bound, float64(s.CacheFilesPeak)/float64(bound))
	if failed.Load() > 0 {
		s.Detail = fmt.Sprintf("%d requests failed", failed.Load())
	}
	return nil
}

func countFiles(dir string) int {
	n := 0
	filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			n++
		}
		return nil
	})
	return n
}

func (sb *servingBench) halfSent(ctx context.Context, f *front, s *results.HostileServe, n int) error {
	body := v2Fetch(sb.head)
	u, _ := url.Parse(f.url + "/git-upload-pack")
	var conns []net.Conn
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	var dialErrs int
	for i := range n {
		d := net.Dialer{Timeout: 2 * time.Second}
		c, err := d.DialContext(ctx, "tcp", u.Host)
		if err != nil {
			dialErrs++
			continue
		}
		conns = append(conns, c)
		fmt.Fprintf(c, "POST %s HTTP/1.1\r\nHost: %s\r\nContent-Type: application/x-git-upload-pack-request\r\nGit-Protocol: version=2\r\nX-Forwarded-For: 10.5.%d.%d\r\nContent-Length: %d\r\n\r\n", u.Path, u.Host, i/200, i%200+1, len(body))
		c.Write(body[:len(body)/2])
	}
	s.Sent = n
	start := time.Now()
	s.Detail = honest(ctx, f, "10.5.99.1", body)
	// Connections the front closed (its read timeout, or never accepted past --max-conns).
	closed := 0
	for _, c := range conns {
		c.SetReadDeadline(time.Now().Add(time.Millisecond))
		var b [1]byte
		if _, err := c.Read(b[:]); err != nil && !errors.Is(err, os.ErrDeadlineExceeded) {
			closed++
		}
	}
	s.Outcome = fmt.Sprintf("%d connections made (%d refused), %d closed by the front after %.0f s", len(conns), dialErrs, closed, time.Since(start).Seconds())
	s.Refused = dialErrs
	return nil
}
