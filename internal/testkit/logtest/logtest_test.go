package logtest

import (
	"fmt"
	"strings"
	"sync"
	"testing"
)

func TestBufferKeepsConcurrentWrites(t *testing.T) {
	var b Buffer
	var wg sync.WaitGroup
	for i := range 20 {
		wg.Go(func() { fmt.Fprintf(&b, "line %d\n", i) })
	}
	wg.Wait()
	if got := strings.Count(b.String(), "\n"); got != 20 {
		t.Fatalf("%d lines, want 20:\n%s", got, b.String())
	}
}
