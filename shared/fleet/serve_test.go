package fleet_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mirrorfleet/mirrorfleet/internal/testkit/gittest"
	"github.com/mirrorfleet/mirrorfleet/shared/fleet"
	"github.com/mirrorfleet/mirrorfleet/shared/gitcmd"
	"github.com/mirrorfleet/mirrorfleet/shared/serve"
	"github.com/mirrorfleet/mirrorfleet/shared/serve/packcache"
	"github.com/mirrorfleet/mirrorfleet/shared/store"
)

// The test binary is the pack cache's hook, as the mirrorfleet binary is in production.
func TestMain(m *testing.M) {
	if packcache.IsHook(os.Args) {
		packcache.RunHook()
	}
	os.Exit(m.Run())
}

// TestClonesDuringForcedFetches clones a repo through the fleet's /git/ front in a
// loop while the upstream is force-pushed and the fleet fetches every rewrite. Every
// clone must succeed and be complete (fsck) with a main the upstream really had.
func TestClonesDuringForcedFetches(t *testing.T) {
	gittest.Require(t)
	logs := dumpOnFailure(t)
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	data := t.TempDir()
	f, err := fleet.Start(context.Background(), fleet.Config{
		Data: data, Listen: "127.0.0.1:0", Workers: 2, Fetchers: 2, Token: token, AllowPrivateHosts: true,
		Tick: heartbeat, Heartbeat: heartbeat, Grace: grace, Warmup: -1, MinInterval: 50 * time.Millisecond,
		Serve: serve.Config{Hook: []string{self, packcache.Arg}},
		Log:   slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
	})
	if err != nil {
		t.Fatal(err)
	}
	r := &running{Fleet: f}
	t.Cleanup(func() { r.stop() })
	waitRing(t, r, 2)

	srv := gittest.NewServer(t)
	up := srv.NewRepo(t, "team/forced")
	for i := range 5 {
		up.Commit(t, fmt.Sprint("base ", i), map[string][]byte{fmt.Sprint("f", i): gittest.RandomBytes(t, 32<<10)})
	}
	up.Branch(t, "dev", "HEAD~2")
	ids := addRepos(t, r, up.URL())
	var cloneURL string
	eventually(t, r, 30*time.Second, "first mirror", func() string {
		var rp struct {
			State    store.RepoState `json:"state"`
			CloneURL string          `json:"clone_url"`
		}
		resp, err := http.Get("http://" + r.Addr() + "/v1/repos/" + ids[0])
		if err != nil {
			return err.Error()
		}
		defer resp.Body.Close()
		json.NewDecoder(resp.Body).Decode(&rp)
		cloneURL = rp.CloneURL
		if rp.State != store.RepoOK {
			return "state " + string(rp.State)
		}
		return ""
	})
	if !strings.HasPrefix(cloneURL, "http://"+r.Addr()+"/git/") {
		t.Fatalf("clone_url %q", cloneURL)
	}

	// Every main the upstream ever had; a clone must show one of them.
	var mu sync.Mutex
	mains := map[string]bool{up.Head(t): true}
	observed := map[string]bool{} // mains the clones saw

	home := t.TempDir()
	stop := make(chan struct{})
	var clones, failures atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan string, 1000)
	for c := range 3 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				dst := filepath.Join(t.TempDir(), fmt.Sprintf("c%d-%d.git", c, i))
				step, out, err := "clone", "", error(nil)
				out, err = gitOut(home, "", "clone", "--mirror", "--quiet", cloneURL, dst)
				if err == nil {
					step = "fsck"
					out, err = gitOut(home, "", "--git-dir="+dst, "fsck", "--full", "--no-dangling")
				}
				if err == nil {
					step = "rev-parse main"
					out, err = gitOut(home, "", "--git-dir="+dst, "rev-parse", "refs/heads/main")
				}
				clones.Add(1)
				if err != nil {
					failures.Add(1)
					errs <- fmt.Sprintf("clone %d/%d: %s: %v: %s", c, i, step, err, out)
				} else {
					mu.Lock()
					observed[strings.TrimSpace(out)] = true
					mu.Unlock()
				}
				os.RemoveAll(dst)
			}
		}()
	}

	// Force-push main and dev over and over, asking the fleet to fetch each time.
	const rewrites = 15
	for i := range rewrites {
		_, newMain := up.Rewrite(t, "main", 1, fmt.Sprint("rewrite ", i), map[string][]byte{"big": gittest.RandomBytes(t, 64<<10)})
		up.Rewrite(t, "dev", 1, fmt.Sprint("dev rewrite ", i), nil)
		mu.Lock()
		mains[newMain] = true
		mu.Unlock()
		requestSync := func() string {
			req, _ := http.NewRequest(http.MethodPost, "http://"+r.Addr()+"/v1/repos/"+ids[0]+"/sync", nil)
			req.Header.Set("Authorization", "Bearer "+token)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				return err.Error()
			}
			resp.Body.Close()
			return ""
		}
		if why := requestSync(); why != "" {
			t.Fatal(why)
		}
		mirror := filepath.Join(fleet.MirrorsDir(data), strings.TrimPrefix(cloneURL, "http://"+r.Addr()+"/git/"))
		eventually(t, r, 30*time.Second, "the fleet fetches rewrite "+fmt.Sprint(i), func() string {
			got, err := gitOut(home, "", "--git-dir="+mirror, "rev-parse", "refs/heads/main")
			if err != nil || strings.TrimSpace(got) != newMain {
				return "mirror main " + got
			}
			return ""
		})
	}
	close(stop)
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Error(e)
	}
	for m := range observed {
		if !mains[m] {
			t.Errorf("a clone's main %s was never upstream's", m)
		}
	}
	t.Logf("%d clones during %d forced fetches, %d failed", clones.Load(), rewrites, failures.Load())
	if clones.Load() < rewrites {
		t.Fatalf("only %d clones ran", clones.Load())
	}
}

func gitOut(home, dir string, args ...string) (string, error) {
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	cmd.Env = gittest.Env(home)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// TestStartSaysGitIsMissing: without git the fleet does not start, and says what to
// install.
func TestStartSaysGitIsMissing(t *testing.T) {
	t.Setenv(gitcmd.EnvGit, filepath.Join(t.TempDir(), "no-git-here"))
	_, err := fleet.Start(context.Background(), fleet.Config{Data: t.TempDir(), Listen: "127.0.0.1:0"})
	if err == nil || !strings.Contains(err.Error(), "git not found") || !strings.Contains(err.Error(), "install") {
		t.Fatalf("Start without git: %v", err)
	}
}
