package scheduler

import (
	"math/rand/v2"
	"strings"
	"testing"
	"time"
)

func TestScheduleName(t *testing.T) {
	long := strings.Repeat("x", 100)
	tests := []struct {
		in     string
		want   string // exact result, or "" to check only the prefix
		prefix string
	}{
		{in: "warmup", want: "warmup"},
		{in: "death-w1", want: "death-w1"},
		{in: "death-w_1.a-B9", want: "death-w_1.a-B9"},
		{in: strings.Repeat("a", 64), want: strings.Repeat("a", 64)},
		{in: strings.Repeat("a", 65), prefix: strings.Repeat("a", 47) + "."},
		{in: "death-a/b", prefix: "death-a_b."},
		{in: "death-a:b", prefix: "death-a_b."},
		{in: "death-wörker", prefix: "death-w_rker."}, // one '_' per character, not per byte
		{in: "death w 1", prefix: "death_w_1."},
		{in: "", prefix: "."},
		{in: long, prefix: strings.Repeat("x", 47) + "."},
	}
	for _, tc := range tests {
		got := ScheduleName(tc.in)
		if !ValidName(got) {
			t.Errorf("ScheduleName(%q) = %q: not a valid schedule name", tc.in, got)
		}
		if tc.want != "" && got != tc.want {
			t.Errorf("ScheduleName(%q) = %q, want %q", tc.in, got, tc.want)
		}
		if tc.prefix != "" {
			if !strings.HasPrefix(got, tc.prefix) || len(got) != len(tc.prefix)+hashLen {
				t.Errorf("ScheduleName(%q) = %q, want %q + %d hex digits", tc.in, got, tc.prefix, hashLen)
			}
		}
		if again := ScheduleName(tc.in); again != got {
			t.Errorf("ScheduleName(%q) not deterministic: %q then %q", tc.in, got, again)
		}
	}
}

// Distinct timer names must never share a schedule, including names whose readable
// parts coincide and names that are valid as they are.
func TestScheduleNameNoCollisions(t *testing.T) {
	names := []string{"death-a/b", "death-a:b", "death-a_b", "death-a b", "death-a\x00b", "death-aé", "death-aè",
		strings.Repeat("y", 64), strings.Repeat("y", 65), strings.Repeat("y", 66), strings.Repeat("y", 64) + "/"}
	for i := range 2000 {
		// long names that share a 60-character prefix and differ only at the end
		names = append(names, strings.Repeat("w", 60)+"-"+string(rune('a'+i%26))+strings.Repeat("z", i/26))
	}
	seen := map[string]string{}
	for _, n := range names {
		s := ScheduleName(n)
		if prev, ok := seen[s]; ok {
			t.Fatalf("%q and %q both map to schedule %q", prev, n, s)
		}
		seen[s] = n
	}
}

func TestFireTime(t *testing.T) {
	now := time.Date(2030, 1, 1, 12, 0, 20, 0, time.UTC)
	tests := []struct {
		name     string
		at, want time.Time
	}{
		{"whole minute stays", now.Add(10*time.Minute - 20*time.Second), time.Date(2030, 1, 1, 12, 10, 0, 0, time.UTC)},
		{"seconds round up", time.Date(2030, 1, 1, 12, 10, 1, 0, time.UTC), time.Date(2030, 1, 1, 12, 11, 0, 0, time.UTC)},
		{"a nanosecond rounds up", time.Date(2030, 1, 1, 12, 10, 0, 1, time.UTC), time.Date(2030, 1, 1, 12, 11, 0, 0, time.UTC)},
		{"other zone becomes UTC", time.Date(2030, 1, 1, 13, 10, 30, 0, time.FixedZone("CET", 3600)), time.Date(2030, 1, 1, 12, 11, 0, 0, time.UTC)},
		{"past: now+1m rounded up", now.Add(-time.Hour), time.Date(2030, 1, 1, 12, 2, 0, 0, time.UTC)},
		{"too soon: now+1m rounded up", now.Add(30 * time.Second), time.Date(2030, 1, 1, 12, 2, 0, 0, time.UTC)},
		{"just past the lead", time.Date(2030, 1, 1, 12, 1, 21, 0, time.UTC), time.Date(2030, 1, 1, 12, 2, 0, 0, time.UTC)},
	}
	for _, tc := range tests {
		if got := FireTime(tc.at, now); !got.Equal(tc.want) || got.Location() != time.UTC {
			t.Errorf("%s: FireTime(%s) = %s, want %s", tc.name, tc.at, got, tc.want)
		}
	}
}

// The invariant behind the rounding: a timer never fires before it is due, never less
// than MinLead after it is armed, and never more than a minute later than that needs.
func TestFireTimeNeverEarly(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	base := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	for range 10000 {
		now := base.Add(time.Duration(r.Int64N(int64(24 * time.Hour))))
		at := now.Add(time.Duration(r.Int64N(int64(2*time.Hour))) - time.Hour)
		got := FireTime(at, now)
		if got.Before(at) || got.Before(now.Add(MinLead)) {
			t.Fatalf("FireTime(%s, now %s) = %s: early", at, now, got)
		}
		if got.Second() != 0 || got.Nanosecond() != 0 {
			t.Fatalf("FireTime(%s) = %s: not a whole minute", at, got)
		}
		latest := at
		if l := now.Add(MinLead); l.After(latest) {
			latest = l
		}
		if got.Sub(latest) >= time.Minute {
			t.Fatalf("FireTime(%s, now %s) = %s: a minute or more later than needed", at, now, got)
		}
	}
}

func TestAtExpression(t *testing.T) {
	at := time.Date(2030, 2, 3, 4, 5, 0, 0, time.UTC)
	if got := AtExpression(at); got != "at(2030-02-03T04:05:00)" {
		t.Errorf("AtExpression = %q", got)
	}
	if got := AtExpression(at.In(time.FixedZone("X", -7200))); got != "at(2030-02-03T04:05:00)" {
		t.Errorf("AtExpression of a non-UTC time = %q, want it in UTC", got)
	}
	back, err := ParseAt(AtExpression(at))
	if err != nil || !back.Equal(at) {
		t.Errorf("ParseAt(AtExpression) = %s, %v", back, err)
	}
	for _, bad := range []string{"", "rate(1 minute)", "at(2030-02-03 04:05:00)", "at(2030-02-03T04:05)", "at(2030-13-03T04:05:00)"} {
		if _, err := ParseAt(bad); err == nil {
			t.Errorf("ParseAt(%q) succeeded", bad)
		}
	}
}

func TestDescriptionKeepsWholeCharacters(t *testing.T) {
	d := description(strings.Repeat("é", 600))
	if n := len([]rune(d)); n != maxDescription {
		t.Errorf("description has %d characters, want %d", n, maxDescription)
	}
	if !strings.HasPrefix(d, "mirrorfleet timer é") || strings.ContainsRune(d, '\uFFFD') {
		t.Errorf("description cut badly: %q", d[:40])
	}
}
