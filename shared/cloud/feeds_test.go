package cloud

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"

	"github.com/mirrorfleet/mirrorfleet/internal/testkit/cloudtest"
	"github.com/mirrorfleet/mirrorfleet/internal/testkit/dynamotest"
	"github.com/mirrorfleet/mirrorfleet/internal/testkit/gittest"
	"github.com/mirrorfleet/mirrorfleet/internal/testkit/secretsfake"
	"github.com/mirrorfleet/mirrorfleet/internal/testkit/storetest"
	"github.com/mirrorfleet/mirrorfleet/shared/mirror"
	"github.com/mirrorfleet/mirrorfleet/shared/store/dynamo"
)

// giteaFeed is a fake Gitea instance's repo search (GET /api/v1/repos/search, sorted by
// update, as Gitea's API documents it) listing one repo with a settable update time.
type giteaFeed struct {
	mu      sync.Mutex
	clone   string
	updated time.Time
	probes  int
}

func (g *giteaFeed) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path != "/api/v1/repos/search" || r.URL.Query().Get("sort") != "updated" {
		http.NotFound(w, r)
		return
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	g.probes++
	json.NewEncoder(w).Encode(map[string]any{"ok": true, "data": []map[string]any{
		{"clone_url": g.clone, "html_url": strings.TrimSuffix(g.clone, ".git"), "updated_at": g.updated.UTC().Format(time.RFC3339)}}})
}

func (g *giteaFeed) set(at time.Time) {
	g.mu.Lock()
	g.updated = at
	g.mu.Unlock()
}

func (g *giteaFeed) count() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.probes
}

// A worker on DynamoDB Local probes a Gitea feed for its own repos (ADR 28), its tokens
// read from the Secrets Manager fake: a push the feed lists is fetched at once, with no
// sync request and no coordinator tick in between.
func TestRunWorkerFollowsAFeed(t *testing.T) {
	st := dynamotest.Table(t, "mf_feeds", dynamo.Config{})
	ep := dynamotest.Endpoint(t)
	srv := gittest.NewServer(t)
	up := srv.NewRepo(t, "feed/app")
	up.Commit(t, "init", map[string][]byte{"a": []byte("1\n")})
	target := storetest.AddPending(t, st, up.URL())
	feed := &giteaFeed{clone: up.URL(), updated: time.Now().Add(-time.Hour)}
	forge := httptest.NewServer(feed)
	defer forge.Close()
	sm := secretsfake.New()
	defer sm.Close()
	arn := sm.Put("forge-tokens", "# the feeds' tokens\ncodeberg.org=tok-1\n")

	root := t.TempDir()
	paths, err := mirror.New(mirror.Config{Root: root})
	if err != nil {
		t.Fatal(err)
	}
	defer paths.Close()
	dir, _ := paths.Path(target)
	mirrored := func() bool {
		if _, err := os.Stat(dir); err != nil {
			return false
		}
		return gittest.RefsOf(t, dir) == up.Refs(t)
	}

	stop := cloudtest.Go(t, "worker", func(ctx context.Context) error {
		return RunWorker(ctx, WorkerConfig{Table: st.Table(), MirrorRoot: root, Fetchers: 2, Heartbeat: 100 * time.Millisecond,
			MinInterval: time.Hour, PriorityPolicy: "bayes", AllowPrivateHosts: true, WorkerID: "w-feeds", Fleet: "test",
			MetricsInterval: time.Hour, DynamoDBEndpoint: ep, Metrics: io.Discard, Log: slog.New(slog.DiscardHandler),
			Feeds: []string{"gitea=" + forge.URL}, FeedEvery: 200 * time.Millisecond, ForgeTokensARN: arn,
			SecretsManager: secretsmanager.New(secretsmanager.Options{Region: "us-east-1", BaseEndpoint: aws.String(sm.URL()),
				Credentials: credentials.NewStaticCredentialsProvider("AKID", "SECRET", "")})})
	})
	defer stop()
	coord := cloudtest.Coordinator("c-feeds", st)
	deadline := time.Now().Add(60 * time.Second)
	for !mirrored() {
		if time.Now().After(deadline) {
			t.Fatal("the repo was not mirrored")
		}
		if _, err := coord.Tick(t.Context()); err != nil {
			t.Logf("tick: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if sm.Calls() != 1 {
		t.Errorf("the tokens secret was read %d times, want once", sm.Calls())
	}

	// A push the feed lists: fetched without a tick or a sync request.
	probes := feed.count()
	up.Commit(t, "two", map[string][]byte{"a": []byte("2\n")})
	time.Sleep(time.Second) // no poll in the minimum interval fetches it meanwhile
	if mirrored() {
		t.Fatal("the push was fetched before the feed listed it")
	}
	feed.set(time.Now())
	start := time.Now()
	for !mirrored() {
		if time.Since(start) > 30*time.Second {
			t.Fatal("the push the feed listed was not fetched")
		}
		time.Sleep(20 * time.Millisecond)
	}
	if feed.count() <= probes {
		t.Error("the feed was not probed")
	}
	if rp, err := st.GetRepo(t.Context(), target.ID); err != nil || rp.SyncRequested {
		t.Errorf("repo %+v (%v): the feed made a sync request; it should fetch directly", rp, err)
	}
	t.Logf("feed listed → fetched: %s", time.Since(start).Round(time.Millisecond))
}

func TestWorkerConfigFeeds(t *testing.T) {
	env := map[string]string{EnvTable: "t", EnvWorkerID: "w1",
		EnvFeeds: "gitea=https://codeberg.org, github=https://github.com", EnvForgeTokensARN: "arn:aws:secretsmanager:us-east-1:123456789012:secret:tokens-AbCdEf"}
	c, err := workerConfigFrom(t.Context(), func(k string) string { return env[k] })
	if err != nil || len(c.Feeds) != 2 || c.FeedEvery != 5*time.Minute || c.ForgeTokensARN == "" {
		t.Fatalf("%+v %v", c, err)
	}
	env[EnvFeeds], env[EnvFeedEvery] = "svn=https://x.org", "10s"
	if _, err := workerConfigFrom(t.Context(), func(k string) string { return env[k] }); err == nil ||
		!strings.Contains(err.Error(), EnvFeeds) || !strings.Contains(err.Error(), EnvFeedEvery) {
		t.Fatalf("bad feed and period: %v", err)
	}
}

// The feeds' runner reads the tokens' secret again through a cache: a rotated token is
// taken up while the worker runs, and a tick within the cache's time costs no call.
func TestWorkerFeedsReadTheirTokensAgain(t *testing.T) {
	sm := secretsfake.New()
	defer sm.Close()
	arn := sm.Put("forge-tokens", "codeberg.org=tok-1\n")
	client := secretsmanager.New(secretsmanager.Options{Region: "us-east-1", BaseEndpoint: aws.String(sm.URL()),
		Credentials: credentials.NewStaticCredentialsProvider("AKID", "SECRET", "")})
	r, err := workerFeeds(t.Context(), WorkerConfig{Feeds: []string{"gitea=https://codeberg.org"}, ForgeTokensARN: arn, SecretsManager: client},
		slog.New(slog.DiscardHandler), nil)
	if err != nil || r == nil || r.Tokens == nil {
		t.Fatalf("runner %v, err %v: no tokens to read again", r, err)
	}
	toks, err := r.Tokens(t.Context())
	if err != nil || toks["codeberg.org"] != "tok-1" || sm.Calls() != 1 {
		t.Errorf("tokens %v (%v) after %d calls, want tok-1 from the start's read", toks, err, sm.Calls())
	}
	// At start, a secret that is not HOST=TOKEN lines stops the worker, naming the
	// setting.
	sm.Put("forge-tokens", "not a token line")
	if _, err := workerFeeds(t.Context(), WorkerConfig{Feeds: []string{"gitea=https://codeberg.org"}, ForgeTokensARN: arn, SecretsManager: client},
		slog.New(slog.DiscardHandler), nil); err == nil || !strings.Contains(err.Error(), EnvForgeTokensARN) {
		t.Errorf("a bad secret at start: %v", err)
	}
}
