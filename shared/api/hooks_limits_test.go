package api

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mirrorfleet/mirrorfleet/shared/httpguard"
)

// slowBody opens a connection from the loopback address from (127.0.0.x) and sends a
// signed GitHub delivery's headers and the first bytes of its body, then nothing.
func (e *hookEnv) slowBody(from string) net.Conn {
	e.t.Helper()
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(from)}}
	c, err := d.Dial("tcp", e.srv.Listener.Addr().String())
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() { c.Close() })
	body := githubBody("https://github.com/org/app", "")
	fmt.Fprintf(c, "POST %sgithub HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nX-GitHub-Event: push\r\n"+
		"X-GitHub-Delivery: slow-%s\r\nX-Hub-Signature-256: sha256=%s\r\nContent-Length: %d\r\n\r\n%s",
		HookPrefix, c.LocalAddr(), sign("topsecret", body), len(body), body[:5])
	return c
}

// honest sends n signed deliveries at once, each its own, and counts the answers by
// status.
func (e *hookEnv) honest(n int, prefix string) map[int]int {
	e.t.Helper()
	body := githubBody("https://github.com/org/app", "")
	var mu sync.Mutex
	got := map[int]int{}
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			code, _ := e.github("push", fmt.Sprintf("%s-%d", prefix, i), "topsecret", body)
			mu.Lock()
			got[code]++
			mu.Unlock()
		}()
	}
	wg.Wait()
	return got
}

// waitHeld waits until the hooks hold n deliveries of client (running or waiting).
func waitHeld(t *testing.T, h *hooks, client string, n int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		_, _, r, w := h.flight.InUse(client)
		if r+w >= n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s holds %d running and %d waiting, want %d", client, r, w, n)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestSlowBodiesHoldNoSlot: 32 connections that send a delivery's headers and 5 bytes
// of its body, from one address or from 32, keep no honest signed delivery from another
// address out: every one of 24 is accepted while they hang. The slow ones are cut at
// the body deadline (408).
func TestSlowBodiesHoldNoSlot(t *testing.T) {
	e := newHookEnv(t, func(c *HookConfig) { c.BodyTimeout = 3 * time.Second })
	e.add("https://github.com/org/app")
	h := e.h.(*hooks)
	var slow []net.Conn
	for range 32 {
		slow = append(slow, e.slowBody("127.0.0.2"))
	}
	waitHeld(t, h, "127.0.0.2", DefaultHookPerClient)
	if got := e.honest(24, "one"); got[202] != 24 {
		t.Fatalf("24 honest deliveries beside 32 slow bodies from one address: %v", got)
	}
	for i := range 32 {
		slow = append(slow, e.slowBody(fmt.Sprintf("127.0.1.%d", i+1)))
	}
	for i := range 32 {
		waitHeld(t, h, fmt.Sprintf("127.0.1.%d", i+1), 1)
	}
	if got := e.honest(24, "many"); got[202] != 24 {
		t.Fatalf("24 honest deliveries beside 32 slow bodies from 32 addresses: %v", got)
	}
	// The slow ones end at their body deadline.
	buf := make([]byte, 64)
	slow[len(slow)-1].SetReadDeadline(time.Now().Add(30 * time.Second))
	n, err := slow[len(slow)-1].Read(buf)
	if err != nil || !strings.Contains(string(buf[:n]), " 408 ") {
		t.Fatalf("a slow body's answer: %q %v", buf[:n], err)
	}
}

// TestConcurrentDeliveriesAreServed: 64 honest deliveries at once from one address (a
// forge's hook sender) are all accepted: past the slots and the address's share they
// wait briefly rather than get 503.
func TestConcurrentDeliveriesAreServed(t *testing.T) {
	e := newHookEnv(t, nil)
	e.add("https://github.com/org/app")
	if got := e.honest(64, "burst"); got[202] != 64 {
		t.Fatalf("64 concurrent honest deliveries: %v, want 64 × 202", got)
	}
}

// TestHooksBoundTheDeliveriesReadAtOnce: past the handling slots a delivery waits up
// to Wait, then is refused with 503 and Retry-After and fetches nothing; past its
// address's share and queue, 429.
func TestHooksBoundTheDeliveriesReadAtOnce(t *testing.T) {
	e := newHookEnv(t, func(c *HookConfig) { c.Concurrent, c.Wait, c.PerClient, c.ClientQueue = 2, 200*time.Millisecond, 3, 1 })
	e.add("https://github.com/org/app")
	h := e.h.(*hooks)
	var held []func()
	for range 2 { // two deliveries being handled
		rel, why := h.slots.Acquire(context.Background(), "", "", 0)
		if why != httpguard.Admitted {
			t.Fatal(why)
		}
		held = append(held, rel)
	}
	code, body := e.github("push", "busy-1", "topsecret", githubBody("https://github.com/org/app", ""))
	if code != http.StatusServiceUnavailable || !strings.Contains(body, `"busy"`) || len(e.rings()) != 0 {
		t.Fatalf("a delivery past the slots: %d %s, %d rings", code, body, len(e.rings()))
	}
	held[0]()
	if code, _ := e.github("push", "busy-1", "topsecret", githubBody("https://github.com/org/app", "")); code != http.StatusAccepted || len(e.rings()) != 1 {
		t.Fatalf("the retried delivery: %d, %d rings", code, len(e.rings()))
	}
	held[1]()
	for range 3 { // the address's share, in flight
		rel, _ := h.flight.Acquire(context.Background(), "127.0.0.1", "", 0)
		defer rel()
	}
	got := e.honest(3, "share") // one waits in the queue and gives up, two are past it
	if got[429] != 3 {
		t.Fatalf("deliveries past the address's share: %v, want 3 × 429", got)
	}
}

// TestSecretForOneHostVouchesForItsReposOnly: a delivery signed with one host's secret
// (--webhook-secret-for) that names a mirrored repo on another host fetches nothing;
// the same host's repos still match, and the shared secret does not vouch for a host
// that has its own.
func TestSecretForOneHostVouchesForItsReposOnly(t *testing.T) {
	e := newHookEnv(t, func(c *HookConfig) {
		c.SecretFor = map[string]string{"forge-a.example": "secret-a", "forge-b.example": "secret-b"}
	})
	victim := e.add("https://forge-b.example/org/victim")
	own := e.add("https://forge-a.example/org/own")
	forged := githubBody("https://forge-a.example/org/nothing.git", "https://forge-b.example/org/victim")
	if code, body := e.github("push", "x1", "secret-a", forged); code != 202 {
		t.Fatalf("%d %s", code, body)
	}
	if r, _ := e.store.GetRepo(context.Background(), victim); r.SyncRequested || len(e.rings()) != 0 {
		t.Fatalf("host A's secret made host B's repo fetch: sync %v, rings %v", r.SyncRequested, e.rings())
	}
	// The shared secret (topsecret) does not vouch for forge-b, which has its own.
	if code, _ := e.github("push", "x2", "topsecret", githubBody("https://elsewhere.example/o/r.git", "https://forge-b.example/org/victim")); code != 202 || len(e.rings()) != 0 {
		t.Fatalf("the shared secret vouched for forge-b: %d, rings %v", code, e.rings())
	}
	if code, _ := e.github("push", "x3", "secret-a", githubBody("https://forge-a.example/org/own.git", "https://forge-b.example/org/victim")); code != 202 {
		t.Fatal(code)
	}
	if rung := e.rings(); len(rung) != 1 || rung[0] != own {
		t.Fatalf("host A's own repo: rings %v, want %s", rung, own)
	}
}

// TestHookFindsTheRepoWhateverTheCase: github.com's paths are case-insensitive, and its
// hooks name a repository in its own case: a hook for Org/Repo reaches the repo added as
// org/repo. On a host whose paths are case-sensitive another case is another repo.
func TestHookFindsTheRepoWhateverTheCase(t *testing.T) {
	e := newHookEnv(t, nil)
	id := e.add("https://github.com/org/repo")
	other := e.add("https://codeberg.org/org/repo")
	if code, body := e.github("push", "c1", "topsecret", githubBody("https://github.com/Org/Repo.git", "https://github.com/Org/Repo")); code != 202 {
		t.Fatalf("%d %s", code, body)
	}
	if rung := e.rings(); len(rung) != 1 || rung[0] != id {
		t.Fatalf("a hook for Org/Repo rang %v, want the repo added as org/repo (%s)", rung, id)
	}
	if code, _ := e.github("push", "c2", "topsecret", githubBody("https://codeberg.org/Org/Repo.git", "")); code != 202 {
		t.Fatal(code)
	}
	if rung := e.rings(); len(rung) != 1 {
		t.Fatalf("a hook for codeberg.org/Org/Repo rang %v; codeberg.org/org/repo (%s) is another repo", rung, other)
	}
}
