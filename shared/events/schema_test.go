package events_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/mirrorfleet/mirrorfleet/internal/testkit/gittest"
	"github.com/mirrorfleet/mirrorfleet/shared/events"
	"github.com/mirrorfleet/mirrorfleet/shared/fetch"
	"github.com/mirrorfleet/mirrorfleet/shared/mirror"
	"github.com/mirrorfleet/mirrorfleet/shared/store"
	"github.com/mirrorfleet/mirrorfleet/shared/urlpolicy"
)

// validate checks v against the subset of JSON Schema docs/events.schema.json uses:
// type, properties, required, additionalProperties: false, items, minItems,
// maxItems, pattern, format: date-time, const, minimum and local $ref.
func validate(root, s map[string]any, v any, at string) []string {
	if ref, ok := s["$ref"].(string); ok {
		name, ok := strings.CutPrefix(ref, "#/$defs/")
		if !ok {
			return []string{at + ": unsupported $ref " + ref}
		}
		return validate(root, root["$defs"].(map[string]any)[name].(map[string]any), v, at)
	}
	var errs []string
	bad := func(f string, args ...any) { errs = append(errs, at+": "+fmt.Sprintf(f, args...)) }
	known := []string{"$schema", "$id", "$defs", "title", "description", "type", "properties", "required",
		"additionalProperties", "items", "minItems", "maxItems", "pattern", "format", "const", "minimum"}
	for k := range s {
		if !slices.Contains(known, k) {
			bad("the validator does not know the keyword %q", k)
		}
	}
	if c, ok := s["const"]; ok && fmt.Sprint(c) != fmt.Sprint(v) {
		bad("%v, want %v", v, c)
	}
	switch s["type"] {
	case "object":
		o, ok := v.(map[string]any)
		if !ok {
			bad("not an object")
			return errs
		}
		props, _ := s["properties"].(map[string]any)
		for _, r := range s["required"].([]any) {
			if _, ok := o[r.(string)]; !ok {
				bad("%s missing", r)
			}
		}
		for k, x := range o {
			ps, ok := props[k].(map[string]any)
			if !ok {
				if s["additionalProperties"] == false {
					bad("unknown property %q", k)
				}
				continue
			}
			errs = append(errs, validate(root, ps, x, at+"."+k)...)
		}
	case "array":
		a, ok := v.([]any)
		if !ok {
			bad("not an array")
			return errs
		}
		if n, ok := s["minItems"].(float64); ok && len(a) < int(n) {
			bad("%d items, want at least %v", len(a), n)
		}
		if n, ok := s["maxItems"].(float64); ok && len(a) > int(n) {
			bad("%d items, want at most %v", len(a), n)
		}
		for i, x := range a {
			errs = append(errs, validate(root, s["items"].(map[string]any), x, fmt.Sprintf("%s[%d]", at, i))...)
		}
	case "string":
		str, ok := v.(string)
		if !ok {
			bad("not a string")
			return errs
		}
		if p, ok := s["pattern"].(string); ok && !regexp.MustCompile(p).MatchString(str) {
			bad("%q does not match %s", str, p)
		}
		if s["format"] == "date-time" {
			if _, err := time.Parse(time.RFC3339Nano, str); err != nil {
				bad("%q is not a date-time", str)
			}
		}
	case "integer":
		n, ok := v.(float64)
		if !ok || n != float64(int64(n)) {
			bad("%v is not an integer", v)
		} else if m, ok := s["minimum"].(float64); ok && n < m {
			bad("%v below %v", n, m)
		}
	case nil:
	default:
		bad("unsupported type %v", s["type"])
	}
	return errs
}

func loadSchema(t *testing.T) map[string]any {
	t.Helper()
	b, err := os.ReadFile("../../docs/events.schema.json")
	if err != nil {
		t.Fatal(err)
	}
	var s map[string]any
	if err := json.Unmarshal(b, &s); err != nil {
		t.Fatal(err)
	}
	return s
}

func checkEvent(t *testing.T, schema map[string]any, ev events.Event) {
	t.Helper()
	b, _ := json.Marshal(ev)
	var v any
	_ = json.Unmarshal(b, &v)
	if errs := validate(schema, schema, v, "event"); len(errs) > 0 {
		t.Errorf("%s:\n%s", b, strings.Join(errs, "\n"))
	}
}

// The events of real syncs — a clone, a push, a deletion — and of one past the refs
// bound are valid against docs/events.schema.json; and the validator does
// refuse what the schema rules out.
func TestEmittedEventsMatchTheSchema(t *testing.T) {
	schema := loadSchema(t)
	srv := gittest.NewServer(t)
	up := srv.NewRepo(t, "schema/one")
	up.Commit(t, "init", map[string][]byte{"a": []byte("1\n")})
	up.Branch(t, "dev", "")

	m, err := mirror.New(mirror.Config{Root: t.TempDir(), Client: urlpolicy.Policy{AllowPrivateHosts: true}.HTTPClient(0)})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	var got []events.Event
	hub := events.NewHub(events.Config{Sinks: []events.Sink{sinkFunc(func(e events.Event) { got = append(got, e) })}})
	em := events.Mirror{Mirrorer: m, Hub: hub}
	url, err := urlpolicy.Policy{AllowPrivateHosts: true}.Normalize(up.URL())
	if err != nil {
		t.Fatal(err)
	}
	tg := fetch.Target{ID: store.RepoID(url), URL: url}
	sync := func() {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if _, err := em.Sync(ctx, tg); err != nil {
			t.Fatal(err)
		}
	}
	sync()
	up.Commit(t, "two", map[string][]byte{"a": []byte("2\n")})
	sync()
	up.DeleteBranch(t, "dev")
	sync()
	// A mass tag import past the refs bound (published as a sync would, without
	// fetching 1200 tags here).
	hub.Publish(tg.ID, tg.URL, refUpdates(1200, 4))
	if len(got) != 4 || !got[3].Truncated || got[3].RefCount != 1200 {
		t.Fatalf("%d events; the last: truncated=%v ref_count=%d", len(got), got[len(got)-1].Truncated, got[len(got)-1].RefCount)
	}
	for _, ev := range got {
		checkEvent(t, schema, ev)
	}

	// The validator refuses what the schema rules out.
	bad := got[1]
	bad.Refs = []events.Ref{{Name: "HEAD", Old: "x", New: fetch.ZeroHash}}
	b, _ := json.Marshal(bad)
	var v any
	_ = json.Unmarshal(b, &v)
	v.(map[string]any)["extra"] = 1
	if errs := validate(schema, schema, v, "event"); len(errs) != 3 {
		t.Fatalf("a bad event: %v, want 3 errors (name, old, extra)", errs)
	}
}

type sinkFunc func(events.Event)

func (f sinkFunc) Offer(e events.Event) { f(e) }
