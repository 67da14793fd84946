package metrics

import (
	"sync"
	"testing"
)

func TestTallySumsByNameAndDimensions(t *testing.T) {
	var tl Tally
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			_ = tl.Record(Sample{Name: EventsDelivered, Value: 2, Dims: map[string]string{DimSink: "sse"}},
				Sample{Name: ServeRequests, Value: 1, Dims: map[string]string{DimStatus: "2xx", DimFleet: "prod"}})
		})
	}
	wg.Wait()
	if got := tl.Total("EventsDelivered/sse"); got != 16 {
		t.Errorf("EventsDelivered/sse = %v, want 16", got)
	}
	// Dimension values follow their names' order: Fleet before Status.
	if got, n := tl.Total("ServeRequests/prod/2xx"), tl.Count("ServeRequests/prod/2xx"); got != 8 || n != 8 {
		t.Errorf("ServeRequests/prod/2xx = %v over %d samples, want 8 over 8", got, n)
	}
	if got := tl.Total("EventsDelivered/webhook"); got != 0 {
		t.Errorf("an unrecorded key = %v, want 0", got)
	}
}
