package buildinfo

import (
	"runtime/debug"
	"testing"
)

func TestFromBuild(t *testing.T) {
	bi := &debug.BuildInfo{GoVersion: "go1.26.0", Main: debug.Module{Version: "(devel)"}, Settings: []debug.BuildSetting{
		{Key: "vcs.revision", Value: "0123456789abcdef0123456789abcdef01234567"},
		{Key: "vcs.modified", Value: "true"},
		{Key: "vcs.time", Value: "2026-11-28T06:00:00Z"},
	}}
	got := fromBuild("v1.2.3", bi)
	want := "mirrorfleet v1.2.3 commit 0123456789abcdef0123456789abcdef01234567+dirty (2026-11-28T06:00:00Z) go1.26.0"
	if got.String() != want {
		t.Errorf("String() = %q, want %q", got.String(), want)
	}
	if in := fromBuild("", bi); in.Version != "devel" {
		t.Errorf("without a linked version: %q, want devel", in.Version)
	}
	if in := fromBuild("", &debug.BuildInfo{Main: debug.Module{Version: "v0.9.0"}}); in.Version != "v0.9.0" || in.Commit != "unknown" {
		t.Errorf("a module build: %+v", in)
	}
	if in := fromBuild("", nil); in.Version != "devel" || in.Commit != "unknown" {
		t.Errorf("no build info: %+v", in)
	}
}
