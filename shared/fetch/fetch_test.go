package fetch

import (
	"errors"
	"fmt"
	"testing"
)

func TestErrorNamesItsKindOnce(t *testing.T) {
	cause := errors.New(`Get "http://127.0.0.1:1/x/info/refs": connection refused`)
	inner := &Error{Kind: KindNetwork, Err: fmt.Errorf("list refs: %w", cause)}
	outer := &Error{Kind: KindNetwork, Err: fmt.Errorf("sync http://127.0.0.1:1/x: %w", inner)}
	want := `network: sync http://127.0.0.1:1/x: list refs: Get "http://127.0.0.1:1/x/info/refs": connection refused`
	if got := outer.Error(); got != want {
		t.Errorf("got  %s\nwant %s", got, want)
	}
	if KindOf(outer) != KindNetwork || !errors.Is(outer, cause) {
		t.Error("the chain is lost")
	}
	// Another kind deeper in is kept: it says something the outer one does not.
	mixed := &Error{Kind: KindOther, Err: fmt.Errorf("sync: %w", inner)}
	if got := mixed.Error(); got != "other: sync: network: list refs: "+cause.Error() {
		t.Errorf("mixed kinds: %s", got)
	}
}
