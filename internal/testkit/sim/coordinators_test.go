package sim_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/mirrorfleet/mirrorfleet/internal/testkit/sim"
	"github.com/mirrorfleet/mirrorfleet/internal/testkit/storetest"
	"github.com/mirrorfleet/mirrorfleet/shared/clock"
	"github.com/mirrorfleet/mirrorfleet/shared/coordinator"
	"github.com/mirrorfleet/mirrorfleet/shared/store"
	"github.com/mirrorfleet/mirrorfleet/shared/timer"
)

// linearStore serialises elections and fenced writes so their order is observable, and
// records any fenced write that lands while a newer term exists (invariant 1).
type linearStore struct {
	storetest.Store
	mu       sync.Mutex
	maxTerm  int64
	stale    []string
	landed   int
	refused  int
	leaderOf map[int64]string
}

func (l *linearStore) CASElection(ctx context.Context, v int64, e store.Election) (store.Election, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	got, err := l.Store.CASElection(ctx, v, e)
	if err == nil {
		if got.Term < l.maxTerm {
			l.stale = append(l.stale, fmt.Sprintf("election went back from term %d to %d", l.maxTerm, got.Term))
		}
		if who, ok := l.leaderOf[got.Term]; ok && who != got.VotedFor {
			l.stale = append(l.stale, fmt.Sprintf("term %d voted for %s and %s", got.Term, who, got.VotedFor))
		}
		l.leaderOf[got.Term] = got.VotedFor
		l.maxTerm = max(l.maxTerm, got.Term)
	}
	return got, err
}

func (l *linearStore) Apply(ctx context.Context, term int64, muts []store.Mutation) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	err := l.Store.Apply(ctx, term, muts)
	switch {
	case err == nil && term < l.maxTerm:
		l.stale = append(l.stale, fmt.Sprintf("write of term %d landed after term %d began", term, l.maxTerm))
	case err == nil:
		l.landed++
	default:
		l.refused++
	}
	return err
}

func TestConcurrentCoordinatorsNeverShareATerm(t *testing.T) {
	for _, tc := range []struct{ coords, rounds int }{{2, 2000}, {5, 800}} {
		t.Run(fmt.Sprintf("%d coordinators", tc.coords), func(t *testing.T) {
			rounds := tc.rounds
			if testing.Short() {
				rounds /= 10
			}
			ctx := context.Background()
			ls := &linearStore{Store: boltStore(t), leaderOf: map[int64]string{}}
			clk := clock.NewVirtual(time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC))
			cfg := coordinator.Config{Warmup: coordinator.NoWarmup, Lease: 3 * time.Second, Grace: time.Minute, SuspectAfter: 20 * time.Second}

			// A small fleet whose workers keep heartbeating while coordinators fight.
			var workers []string
			for i := range 4 {
				w, err := ls.ClaimSlot(ctx, store.Worker{ID: fmt.Sprintf("w%d", i), StartedAt: clk.Now(), HeartbeatAt: clk.Now(), State: store.WorkerJoining}, 64)
				if err != nil {
					t.Fatal(err)
				}
				workers = append(workers, w.ID)
			}
			for i := range 200 {
				url := fmt.Sprintf("https://example.org/r/%d", i)
				if _, _, err := ls.CreateRepo(ctx, store.Repo{ID: store.RepoID(url), URL: url, Source: store.SourceAPI, State: store.RepoPending}); err != nil {
					t.Fatal(err)
				}
			}

			var (
				wg      sync.WaitGroup
				mu      sync.Mutex
				leaders = map[int64]string{}
				errs    []string
			)
			// beat heartbeats worker i; a worker declared dead rejoins as a new incarnation,
			// as a real one does.
			beat := func(i int) {
				mu.Lock()
				defer mu.Unlock()
				w, err := ls.Heartbeat(ctx, workers[i], store.Heartbeat{At: clk.Now()})
				if err == nil && w.State != store.WorkerDead {
					return
				}
				id := fmt.Sprintf("w%d.%d", i, clk.Now().UnixNano())
				if _, err := ls.ClaimSlot(ctx, store.Worker{ID: id, StartedAt: clk.Now(), HeartbeatAt: clk.Now(), State: store.WorkerJoining}, 64); err != nil {
					errs = append(errs, "rejoin: "+err.Error())
					return
				}
				workers[i] = id
			}
			for c := range tc.coords {
				wg.Add(1)
				go func() {
					defer wg.Done()
					co := &coordinator.Coordinator{ID: fmt.Sprintf("c%d", c), Store: ls, Timer: timer.NewLocal(), Clock: clk, Config: cfg, Log: discard()}
					rng := rand.New(rand.NewPCG(uint64(c), 7))
					for range rounds {
						clk.Advance(time.Duration(rng.IntN(1500)) * time.Millisecond)
						if rng.IntN(4) == 0 { // some heartbeat, some do not: workers flap
							beat(rng.IntN(len(workers)))
						}
						rep, err := co.Tick(ctx)
						mu.Lock()
						if err != nil && !isStale(err) {
							errs = append(errs, err.Error())
						}
						if rep.Leader {
							if l, ok := leaders[rep.Term]; ok && l != co.ID {
								errs = append(errs, fmt.Sprintf("term %d led by %s and %s", rep.Term, l, co.ID))
							}
							leaders[rep.Term] = co.ID
						}
						mu.Unlock()
					}
				}()
			}
			wg.Wait()
			if len(errs) > 0 {
				t.Fatalf("%d problems, first: %s", len(errs), errs[0])
			}
			if len(ls.stale) > 0 {
				t.Fatalf("fencing broken: %v", ls.stale[:min(5, len(ls.stale))])
			}
			if len(leaders) < 2 {
				t.Fatalf("only %d terms: leadership never changed hands, the test proves nothing", len(leaders))
			}
			if ls.refused == 0 {
				t.Fatal("no write was ever refused: coordinators never raced")
			}

			// Quiesce: everyone heartbeats, one coordinator ticks until stable.
			co := &coordinator.Coordinator{ID: "final", Store: ls, Timer: timer.NewLocal(), Clock: clk, Config: cfg, Log: discard()}
			clk.Advance(time.Minute)
			for range 5 {
				for i := range workers {
					beat(i)
				}
				if _, err := co.Tick(ctx); err != nil && !isStale(err) {
					t.Fatal(err)
				}
				clk.Advance(time.Second)
			}
			live := map[string]bool{}
			ws, _ := ls.ListWorkers(ctx)
			for _, w := range ws {
				if w.State == store.WorkerActive {
					live[w.ID] = true
				}
			}
			rs, _, err := ls.ListRepos(ctx, "", 1000)
			if err != nil {
				t.Fatal(err)
			}
			if len(rs) != 200 {
				t.Fatalf("%d repos, want 200", len(rs))
			}
			for _, r := range rs {
				if !live[r.Owner] {
					t.Fatalf("repo %s owned by %q, not a live worker (%v)", r.ID, r.Owner, live)
				}
			}
			t.Logf("%d terms, %d fenced writes landed, %d refused", len(leaders), ls.landed, ls.refused)
		})
	}
}

// tickUntilSettled ticks (every 15 s of fleet time) until the fleet settles, or fails.
func tickUntilSettled(t *testing.T, s *sim.Sim, within time.Duration) {
	t.Helper()
	end := s.Now().Add(within)
	for s.Now().Before(end) {
		if _, err := s.Coords[0].Tick(context.Background()); err != nil {
			t.Fatal(err)
		}
		if err := s.RunFor(15 * time.Second); err != nil {
			t.Fatal(err)
		}
		if s.Settled() == nil {
			return
		}
	}
	t.Fatalf("not settled within %s: %v", within, s.Settled())
}

// manualSim is a fleet whose coordinator ticks only when the test says so.
func manualSim(t *testing.T, workers, repos int) *sim.Sim {
	t.Helper()
	s := newSim(t, workers, func(c *sim.Config) {
		c.Coordinator.Warmup = coordinator.NoWarmup
		c.Coordinator.Grace = time.Minute
		c.Tick = time.Hour // ticks only when the test says so
	})
	if err := s.AddRepos(repos, 24*time.Hour); err != nil {
		t.Fatal(err)
	}
	tickUntilSettled(t, s, 5*time.Minute)
	return s
}

// TestCrashBetweenAnyTwoWritesIsRepaired kills a tick at each of its writes in turn,
// restarts the coordinator (it forgets what it cached) and checks the next ticks repair
// the fleet: nothing lost, nothing owned twice.
func TestCrashBetweenAnyTwoWritesIsRepaired(t *testing.T) {
	// A busy tick: a worker died, one joined, repos were added and one deleted.
	prepare := func(t *testing.T) (*sim.Sim, int) {
		s := manualSim(t, 4, 400)
		s.Kill(s.Nodes[0])
		if _, err := s.Coords[0].Tick(context.Background()); err != nil { // last sees its count
			t.Fatal(err)
		}
		if err := s.RunFor(2 * time.Minute); err != nil {
			t.Fatal(err)
		}
		s.AddWorker()
		if err := s.RunFor(15 * time.Second); err != nil {
			t.Fatal(err)
		}
		if err := s.AddRepos(150, 24*time.Hour); err != nil {
			t.Fatal(err)
		}
		rs := owners(t, s)
		for id := range rs {
			if err := s.Store.RequestDelete(context.Background(), id); err != nil {
				t.Fatal(err)
			}
			break
		}
		before := s.Store.Writes()["Apply"]
		return s, before
	}
	// Count the writes of the busy tick once.
	s, before := prepare(t)
	if _, err := s.Coords[0].Tick(context.Background()); err != nil {
		t.Fatal(err)
	}
	writes := s.Store.Writes()["Apply"] - before
	if writes < 5 {
		t.Fatalf("the busy tick made only %d writes", writes)
	}
	for k := 1; k <= writes; k++ {
		t.Run(fmt.Sprintf("crash at write %d of %d", k, writes), func(t *testing.T) {
			s, _ := prepare(t)
			want := len(owners(t, s)) - 1 // one repo is being deleted
			s.Store.FailApplyAt(k)
			if _, err := s.Coords[0].Tick(context.Background()); err == nil {
				t.Fatal("the injected failure did not stop the tick")
			}
			s.RestartCoordinators()
			tickUntilSettled(t, s, 5*time.Minute)
			if got := len(owners(t, s)); got != want {
				t.Fatalf("%d repos after repair, want %d", got, want)
			}
		})
	}
}

// TestCrashInAJoinThenAnotherChange crashes a join at each of its writes, then makes
// another membership change — a second join, a death, a drain — before anything repairs
// it. The ring written before the moves, and the scans stored with it, must leave no
// repo on a worker the final ring does not give it.
func TestCrashInAJoinThenAnotherChange(t *testing.T) {
	join := func(t *testing.T) (*sim.Sim, int) {
		s := manualSim(t, 4, 600)
		s.AddWorker()
		if err := s.RunFor(15 * time.Second); err != nil { // it registers
			t.Fatal(err)
		}
		return s, s.Store.Writes()["Apply"]
	}
	s, before := join(t)
	if _, err := s.Coords[0].Tick(context.Background()); err != nil {
		t.Fatal(err)
	}
	writes := s.Store.Writes()["Apply"] - before
	if writes < 3 {
		t.Fatalf("the join made only %d writes", writes)
	}
	changes := map[string]func(s *sim.Sim){
		"join":  func(s *sim.Sim) { s.AddWorker() },
		"death": func(s *sim.Sim) { s.Kill(s.Nodes[1]) },
		"drain": func(s *sim.Sim) {
			if err := s.Nodes[2].W.Leave(context.Background()); err != nil {
				t.Fatal(err)
			}
			s.Kill(s.Nodes[2])
		},
		"newcomer's death": func(s *sim.Sim) { s.Kill(s.Nodes[len(s.Nodes)-1]) },
	}
	for k := 1; k <= writes; k++ {
		for name, change := range changes {
			t.Run(fmt.Sprintf("crash at write %d of %d then %s", k, writes, name), func(t *testing.T) {
				s, _ := join(t)
				repos := len(owners(t, s))
				s.Store.FailApplyAt(k)
				if _, err := s.Coords[0].Tick(context.Background()); err == nil {
					t.Fatal("the injected failure did not stop the tick")
				}
				s.RestartCoordinators()
				change(s)
				tickUntilSettled(t, s, 10*time.Minute)
				if got := len(owners(t, s)); got != repos {
					t.Fatalf("%d repos after the changes, want %d", got, repos)
				}
			})
		}
	}
}

func isStale(err error) bool {
	return errors.Is(err, store.ErrConflict) || errors.Is(err, store.ErrFenced)
}

func discard() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }
