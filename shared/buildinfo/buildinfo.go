// Package buildinfo says which build of mirrorfleet is running: the version given at
// link time (-ldflags "-X .../shared/buildinfo.version=v1.2.3", as the Makefile does
// from git describe) and the commit the Go toolchain stamped into the binary.
package buildinfo

import (
	"runtime/debug"
	"strings"
)

// version and commit are set by the linker; a plain `go build` leaves them empty, and
// the commit then comes from the toolchain's VCS stamp (absent with -buildvcs=false).
var version, commit string

// Info is a build's identity.
type Info struct {
	Version   string `json:"version"`    // the linker's version, else the module's, else "devel"
	Commit    string `json:"commit"`     // vcs.revision, "unknown" without VCS stamping
	Modified  bool   `json:"modified"`   // built from a work tree with uncommitted changes
	Time      string `json:"time"`       // the commit's time (RFC 3339), "" if unknown
	GoVersion string `json:"go_version"` // the toolchain that built it
}

// Get reads the running binary's build information.
func Get() Info {
	in := fromBuild(version, readBuildInfo())
	if commit != "" {
		in.Commit = commit
	}
	return in
}

func readBuildInfo() *debug.BuildInfo {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return nil
	}
	return bi
}

// fromBuild combines the linker's version with the toolchain's stamps.
func fromBuild(linked string, bi *debug.BuildInfo) Info {
	in := Info{Version: linked, Commit: "unknown"}
	if bi == nil {
		if in.Version == "" {
			in.Version = "devel"
		}
		return in
	}
	in.GoVersion = bi.GoVersion
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			in.Commit = s.Value
		case "vcs.modified":
			in.Modified = s.Value == "true"
		case "vcs.time":
			in.Time = s.Value
		}
	}
	if in.Version == "" && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
		in.Version = bi.Main.Version
	}
	if in.Version == "" {
		in.Version = "devel"
	}
	return in
}

// String is the one line `mirrorfleet version` prints.
func (in Info) String() string {
	var b strings.Builder
	b.WriteString("mirrorfleet " + in.Version + " commit " + in.Commit)
	if in.Modified {
		b.WriteString("+dirty")
	}
	if in.Time != "" {
		b.WriteString(" (" + in.Time + ")")
	}
	if in.GoVersion != "" {
		b.WriteString(" " + in.GoVersion)
	}
	return b.String()
}
