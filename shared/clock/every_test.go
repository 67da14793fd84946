package clock

import (
	"context"
	"testing"
	"time"
)

// TestEveryWakesAndStops: a wake runs f at once (the period is an hour), and Every
// returns when its context ends.
func TestEveryWakesAndStops(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	wake := make(chan struct{})
	calls := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		Every(ctx, time.Hour, wake, func() { calls <- struct{}{} })
	}()
	for range 2 {
		wake <- struct{}{}
		<-calls
	}
	cancel()
	<-done
}
