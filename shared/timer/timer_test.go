package timer

import (
	"context"
	"testing"
	"time"

	"github.com/mirrorfleet/mirrorfleet/shared/clock"
)

var t0 = time.Date(2026, 2, 1, 0, 0, 0, 0, time.UTC)

func TestLaterSetOfSameNameReplacesEarlier(t *testing.T) {
	l := NewLocal()
	ctx := context.Background()
	l.Set(ctx, "death-w1", t0.Add(time.Minute), []byte("old"))
	l.Set(ctx, "death-w1", t0.Add(3*time.Minute), []byte("new"))
	l.Set(ctx, "warmup", t0.Add(2*time.Minute), nil)
	if got := l.Due(t0.Add(time.Minute)); len(got) != 0 {
		t.Fatalf("replaced timer fired: %+v", got)
	}
	got := l.Due(t0.Add(10 * time.Minute))
	if len(got) != 2 || got[0].Name != "warmup" || got[1].Name != "death-w1" || string(got[1].Payload) != "new" {
		t.Fatalf("due = %+v, want warmup then death-w1 with the new payload", got)
	}
	if got := l.Due(t0.Add(time.Hour)); len(got) != 0 {
		t.Fatalf("fired twice: %+v", got)
	}
}

func TestCancelAndPending(t *testing.T) {
	l := NewLocal()
	ctx := context.Background()
	l.Set(ctx, "a", t0.Add(2*time.Second), nil)
	l.Set(ctx, "b", t0.Add(time.Second), nil)
	if err := l.Cancel(ctx, "a"); err != nil {
		t.Fatal(err)
	}
	if err := l.Cancel(ctx, "never-set"); err != nil {
		t.Fatalf("cancel of unknown name: %v", err)
	}
	p := l.Pending()
	if len(p) != 1 || p[0].Name != "b" {
		t.Fatalf("pending = %+v", p)
	}
	if got := l.Due(t0.Add(time.Hour)); len(got) != 1 || got[0].Name != "b" {
		t.Fatalf("due = %+v", got)
	}
}

func TestEqualTimesFireInSetOrder(t *testing.T) {
	l := NewLocal()
	for _, n := range []string{"x", "y", "z"} {
		l.Set(context.Background(), n, t0, nil)
	}
	got := l.Due(t0)
	if len(got) != 3 || got[0].Name != "x" || got[1].Name != "y" || got[2].Name != "z" {
		t.Fatalf("order %+v", got)
	}
}

func TestRunDeliversInRealTime(t *testing.T) {
	l := NewLocal()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	fired := make(chan Firing, 2)
	go l.Run(ctx, clock.Real{}, func(_ context.Context, f Firing) { fired <- f })
	l.Set(ctx, "soon", time.Now().Add(20*time.Millisecond), []byte("p"))
	l.Set(ctx, "cancelled", time.Now().Add(10*time.Millisecond), nil)
	l.Cancel(ctx, "cancelled")
	select {
	case f := <-fired:
		if f.Name != "soon" || string(f.Payload) != "p" {
			t.Fatalf("fired %+v", f)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("timer never fired")
	}
	select {
	case f := <-fired:
		t.Fatalf("cancelled timer fired: %+v", f)
	case <-time.After(50 * time.Millisecond):
	}
}
