package worker

import (
	"strconv"
	"testing"
	"time"

	"github.com/mirrorfleet/mirrorfleet/shared/priority"
)

// One poll of a mirrored repo through the step, as the fetch loop drives it: its turn,
// the first look, the fetch that found nothing; the policy is the seed's, so that the
// step's own work shows.
func BenchmarkStepPoll(b *testing.B) {
	cfg := stepConfig()
	cfg.Policy = priority.Cbrt{}
	r := mirrored()
	now := s0
	for b.Loop() {
		now = now.Add(time.Hour)
		v := View{Now: now, Worker: "w1", Front: front}
		Step(&cfg, v, &r, poll)
		Step(&cfg, v, &r, mirror)
		Step(&cfg, v, &r, unchanged)
	}
}

// A queue of a few thousand repos, each popped and pushed back a step on with the
// minimum interval's hold, as the fetch loop keeps it.
func BenchmarkQueuePopPush(b *testing.B) {
	const n = 2000
	q := NewQueue()
	ids := make([]string, n)
	for i := range ids {
		ids[i] = strconv.Itoa(i)
		q.Push(ids[i], float64(i), time.Time{})
	}
	now := s0
	step := 0.0
	for b.Loop() {
		now = now.Add(time.Minute)
		id, prio, ok := q.Pop(now)
		if !ok {
			continue
		}
		step = step*1.1 + 1
		if step > 5000 {
			step = 1
		}
		q.Push(id, prio+step, now.Add(5*time.Minute))
	}
}
