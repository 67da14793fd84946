package listsync

import (
	"slices"
	"strings"
	"testing"
	"time"
)

func TestConfigFromEnv(t *testing.T) {
	env := func(kv map[string]string) func(string) string { return func(k string) string { return kv[k] } }

	c, err := configFrom(env(nil))
	if err != nil || c.Enabled() || c.PurgeThreshold != DefaultPurgeThreshold || c.Interval != DefaultInterval ||
		!slices.Equal(c.Paths, []string{DefaultPath}) || c.Dir == "" {
		t.Fatalf("defaults: %+v, %v", c, err)
	}

	c, err = configFrom(env(map[string]string{
		EnvRepo: "https://git.example.org/mirrors/list.git", EnvBranch: "published",
		EnvPath: "lists/, extra.txt,", EnvInterval: "90s", EnvPurgeThreshold: "12.5%", EnvDir: "/tmp/x",
	}))
	if err != nil {
		t.Fatal(err)
	}
	if !c.Enabled() || c.Branch != "published" || !slices.Equal(c.Paths, []string{"lists/", "extra.txt"}) ||
		c.Interval != 90*time.Second || c.PurgeThreshold != 12.5 || c.Dir != "/tmp/x" {
		t.Fatalf("parsed: %+v", c)
	}

	for _, bad := range []struct {
		kv      map[string]string
		mention []string
	}{
		{map[string]string{EnvInterval: "5"}, []string{EnvInterval, `"5"`}},
		{map[string]string{EnvInterval: "10ms"}, []string{"shorter than"}},
		{map[string]string{EnvPurgeThreshold: "150"}, []string{EnvPurgeThreshold, "0 to 100"}},
		{map[string]string{EnvPurgeThreshold: "five"}, []string{EnvPurgeThreshold}},
		{map[string]string{EnvRepo: "git://example.com/list"}, []string{"https://"}},
		{map[string]string{EnvRepo: "ssh://git@example.com/list"}, []string{"https://"}},
		{map[string]string{EnvBranch: "bad..name"}, []string{"branch"}},
		{map[string]string{EnvPath: "/etc/passwd"}, []string{"relative"}},
		{map[string]string{EnvPath: "../outside.txt"}, []string{"leaves the repository"}},
		// Every problem is reported at once.
		{map[string]string{EnvInterval: "x", EnvPurgeThreshold: "-1"}, []string{EnvInterval, EnvPurgeThreshold}},
	} {
		_, err := configFrom(env(bad.kv))
		if err == nil {
			t.Errorf("%v: accepted", bad.kv)
			continue
		}
		for _, m := range bad.mention {
			if !strings.Contains(err.Error(), m) {
				t.Errorf("%v: error %q does not mention %q", bad.kv, err, m)
			}
		}
	}
}

func TestParsePercent(t *testing.T) {
	for in, want := range map[string]float64{"5": 5, "5%": 5, " 0 ": 0, "100": 100, "12.5 %": 12.5} {
		if got, err := ParsePercent(in); err != nil || got != want {
			t.Errorf("ParsePercent(%q) = %v, %v", in, got, err)
		}
	}
	for _, in := range []string{"", "-1", "101", "NaN", "0x10", "5%%"} {
		if _, err := ParsePercent(in); err == nil {
			t.Errorf("ParsePercent(%q) accepted", in)
		}
	}
}

func TestEachLineAndComments(t *testing.T) {
	long := strings.Repeat("y", 70000) // longer than the reader's buffer
	in := "a\r\n\n# c\n  b # note\nhttps://x.example/a#frag\n" + long + "\nz"
	type line struct {
		n       int
		text    string
		tooLong bool
	}
	var got []line
	if err := eachLine(strings.NewReader(in), func(n int, l []byte, tooLong bool) {
		got = append(got, line{n, strings.TrimSpace(stripComment(string(l))), tooLong})
	}); err != nil {
		t.Fatal(err)
	}
	want := []line{{1, "a", false}, {2, "", false}, {3, "", false}, {4, "b", false},
		{5, "https://x.example/a#frag", false}, {6, long[:MaxLineBytes], true}, {7, "z", false}}
	if !slices.Equal(got, want) {
		t.Fatalf("lines:\n got %.300v\nwant %.300v", got, want)
	}
}
