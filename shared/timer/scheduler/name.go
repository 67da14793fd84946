package scheduler

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"
	"time"
)

// Scheduler's limits on a schedule name: [0-9a-zA-Z-_.]+, 1 to 64 characters.
const (
	maxNameLen = 64
	hashLen    = 16 // hex digits of SHA-256 kept in a mapped name: 64 bits
)

func nameByte(c byte) bool {
	return c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c == '-' || c == '_' || c == '.'
}

// ValidName reports whether s is acceptable to Scheduler as a schedule (or group) name.
func ValidName(s string) bool {
	if len(s) == 0 || len(s) > maxNameLen {
		return false
	}
	for i := 0; i < len(s); i++ {
		if !nameByte(s[i]) {
			return false
		}
	}
	return true
}

// ScheduleName maps a timer name to a schedule name. A name Scheduler accepts as it is
// stays as it is, so schedules read like the coordinator's timers ("death-w1"). Any
// other name keeps a readable prefix — each disallowed character becomes '_', cut to
// fit — followed by '.' and 16 hex digits of the SHA-256 of the original name. Two names
// that map to the same readable part ("a/b", "a:b", or two long names sharing a prefix)
// therefore still get different schedules: a collision needs a 64-bit hash collision.
// The mapping is a pure function of the name, so every coordinator incarnation finds the
// schedule an earlier one made.
func ScheduleName(timerName string) string {
	if ValidName(timerName) {
		return timerName
	}
	var b strings.Builder
	for _, r := range timerName {
		if r < 0x80 && nameByte(byte(r)) {
			b.WriteRune(r)
		} else {
			b.WriteByte('_') // one per character, not per byte: keeps the prefix readable
		}
	}
	prefix := b.String()
	if keep := maxNameLen - 1 - hashLen; len(prefix) > keep {
		prefix = prefix[:keep] // all ASCII by now: cutting bytes cuts characters
	}
	sum := sha256.Sum256([]byte(timerName))
	return prefix + "." + hex.EncodeToString(sum[:])[:hashLen]
}

// atLayout is the date-time inside an at() expression.
const atLayout = "2006-01-02T15:04:05"

// AtExpression is the one-time schedule expression for t, in UTC (the schedules are
// created with ScheduleExpressionTimezone "UTC").
func AtExpression(t time.Time) string {
	return "at(" + t.UTC().Format(atLayout) + ")"
}

// ParseAt reads an at() expression back, interpreting it in UTC.
func ParseAt(expr string) (time.Time, error) {
	inner, ok := strings.CutPrefix(expr, "at(")
	if ok {
		inner, ok = strings.CutSuffix(inner, ")")
	}
	if !ok {
		return time.Time{}, fmt.Errorf("schedule expression %q is not at(yyyy-mm-ddThh:mm:ss)", expr)
	}
	t, err := time.ParseInLocation(atLayout, inner, time.UTC)
	if err != nil {
		return time.Time{}, fmt.Errorf("schedule expression %q: %w", expr, err)
	}
	return t, nil
}

// MinLead is how far ahead of now a schedule is always placed. Scheduler refuses an at()
// in the past, and a time only seconds ahead can be in the past by the time the request
// lands; a minute of lead keeps clear of both at the cost of firing a timer that was due
// within the minute up to two minutes later (the service's precision is a minute anyway).
const MinLead = time.Minute

// FireTime is the time a timer due at at is scheduled for when armed at now. Scheduler
// invokes a one-time schedule some time within the minute it names ("1:00" fires between
// 1:00:00 and 1:00:59), so the time is rounded UP to a whole minute: a death timer never
// fires before the grace has passed. A time in the past, or less than MinLead ahead,
// becomes now+MinLead, rounded up the same way: the timer fires as soon as the service
// reliably can, and the handler (which decides from the store) does the rest.
func FireTime(at, now time.Time) time.Time {
	t := ceilMinute(at)
	if earliest := ceilMinute(now.Add(MinLead)); t.Before(earliest) {
		t = earliest
	}
	return t
}

// ceilMinute rounds t up to a whole minute, in UTC.
func ceilMinute(t time.Time) time.Time {
	t = t.UTC()
	down := t.Truncate(time.Minute)
	if down.Equal(t) {
		return down
	}
	return down.Add(time.Minute)
}
