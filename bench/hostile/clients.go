package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/mirrorfleet/mirrorfleet/bench/internal/results"
	"github.com/mirrorfleet/mirrorfleet/internal/testkit/hostile"
	"github.com/mirrorfleet/mirrorfleet/shared/fleet"
	"github.com/mirrorfleet/mirrorfleet/shared/httpguard"
)

const benchToken = "hostile-bench-token"

// clients attacks a local fleet's API with the default HTTP limits (quick: header and
// body timeouts of 2 s, so the try-out is short).
func clients(ctx context.Context, conns int, quick bool) ([]results.HostileAttack, []results.HostileLimit, error) {
	data, err := os.MkdirTemp("", "hostile-fleet-")
	if err != nil {
		return nil, nil, err
	}
	defer os.RemoveAll(data)
	lim := httpguard.DefaultLimits()
	if quick {
		lim.ReadHeaderTimeout, lim.BodyTimeout = 2*time.Second, 2*time.Second
	}
	f, err := fleet.Start(ctx, fleet.Config{Data: data, Listen: "127.0.0.1:0", Workers: 1, Token: benchToken,
		Warmup: -1, HTTP: lim, HostConcurrency: 1, HostRate: 0.1,
		Log: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		return nil, nil, err
	}
	defer func() {
		sctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		f.Stop(sctx)
	}()
	base := "http://" + f.Addr()
	limits := []results.HostileLimit{
		limit("--http-header-timeout", lim.ReadHeaderTimeout.String()), limit("--http-body-timeout", lim.BodyTimeout.String()),
		limit("--http-max-header-bytes", fmt.Sprint(lim.MaxHeaderBytes)), limit("--max-conns", fmt.Sprint(lim.MaxConns)),
	}
	// An honest client's request during each attack: answered, and how long it waited.
	honest := func() string {
		start := time.Now()
		resp, err := http.Get(base + "/v1/status")
		if err != nil {
			return "an honest request failed: " + err.Error()
		}
		resp.Body.Close()
		return fmt.Sprintf("an honest GET /v1/status during the attack: %d after %.1f s", resp.StatusCode, time.Since(start).Seconds())
	}
	var out []results.HostileAttack
	add := func(name, what string, attack func() (sent, handled int, outcome string, err error)) error {
		var (
			sent, handled int
			outcome, note string
			err           error
		)
		done := make(chan string, 1)
		secs, heap, rss := measure(func() {
			go func() {
				time.Sleep(500 * time.Millisecond)
				done <- honest()
			}()
			sent, handled, outcome, err = attack()
		})
		note = <-done
		if err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		out = append(out, results.HostileAttack{Name: name, What: what, Refused: handled == sent, Outcome: outcome,
			Detail: note, Seconds: secs, HeapPeakMiB: heap, RSSPeakMiB: rss, Sent: sent, Handled: handled})
		return nil
	}
	actx, cancel := context.WithTimeout(ctx, 10*time.Minute)
	defer cancel()
	err = add("rebinding", "requests for /v1/status, /v1/repos, /metrics and / with Host: rebind.attacker.example", func() (int, int, string, error) {
		refused := 0
		paths := []string{"/v1/status", "/v1/repos", "/metrics", "/"}
		for _, p := range paths {
			req, _ := http.NewRequestWithContext(actx, http.MethodGet, base+p, nil)
			req.Host = "rebind.attacker.example"
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				return 0, 0, "", err
			}
			resp.Body.Close()
			if resp.StatusCode == http.StatusForbidden {
				refused++
			}
		}
		return len(paths), refused, "403 host_not_allowed", nil
	})
	if err == nil {
		err = add("slowloris", fmt.Sprintf("%d connections sending a header line every second, never ending the headers", conns), func() (int, int, string, error) {
			closed, err := hostile.Slowloris(actx, f.Addr(), conns, time.Second)
			return conns, closed, "closed by the server", err
		})
	}
	if err == nil {
		err = add("silent-body", fmt.Sprintf("%d connections announcing an authorized 1 MB POST /v1/repos and sending one byte", conns), func() (int, int, string, error) {
			closed, err := hostile.SilentBody(actx, f.Addr(), "/v1/repos", benchToken, conns)
			return conns, closed, "408, then closed by the server", err
		})
	}
	if err == nil {
		err = add("huge-header", "one request with a 1 MiB header", func() (int, int, string, error) {
			status, err := hostile.HugeHeader(actx, base+"/v1/status", 1<<20)
			return 1, btoi(status == http.StatusRequestHeaderFieldsTooLarge), fmt.Sprint(status), err
		})
	}
	if err == nil {
		names := slices.Sorted(func(yield func(string) bool) {
			for k := range hostile.BadJSON {
				if !yield(k) {
					return
				}
			}
		})
		err = add("bad-json", "POST /v1/repos bodies: "+strings.Join(names, ", "), func() (int, int, string, error) {
			refused := 0
			codes := map[int]int{}
			for _, n := range names {
				status, _, err := hostile.Post(actx, base+"/v1/repos", benchToken, hostile.BadJSON[n])
				if err != nil {
					return 0, 0, "", err
				}
				codes[status]++
				if status >= 400 && status < 500 {
					refused++
				}
			}
			return len(names), refused, fmt.Sprint(codes), nil
		})
	}
	if err == nil {
		const clients, requests, per = 16, 40, 250
		err = add("add-flood", fmt.Sprintf("%d clients posting %d bulk adds of %d new URLs each", clients, requests, per), func() (int, int, string, error) {
			counts, err := hostile.AddFlood(actx, base+"/v1/repos", benchToken, clients, requests, per)
			n, cerr := f.Store.CountRepos(actx)
			total := 0
			for _, c := range n {
				total += c
			}
			if cerr != nil {
				err = cerr
			}
			return requests, counts[http.StatusOK], fmt.Sprintf("statuses %v; %d repos stored", counts, total), err
		})
	}
	return out, limits, err
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}
