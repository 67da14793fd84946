package gitcmd

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestParseVersion(t *testing.T) {
	for in, want := range map[string]Version{
		"git version 2.39.5\n":               {2, 39, 5},
		"git version 2.34.1.windows.1":       {2, 34, 1},
		"git version 2.50.0 (Apple Git-155)": {2, 50, 0},
		"git version 3.0":                    {3, 0, 0},
	} {
		got, err := ParseVersion(in)
		if err != nil || got != want {
			t.Errorf("ParseVersion(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	if _, err := ParseVersion("hub version 2.14"); err == nil {
		t.Error("non-git output accepted")
	}
}

func TestFindRealGit(t *testing.T) {
	g, err := Find(context.Background())
	if err != nil {
		t.Fatalf("Find: %v", err)
	}
	if g.Version.Less(MinVersion) || g.Path == "" {
		t.Fatalf("Find = %+v", g)
	}
}

// fakeGit writes a script named git that prints out, and points EnvGit at it.
func fakeGit(t *testing.T, out string) {
	dir := t.TempDir()
	p := filepath.Join(dir, "git")
	if err := os.WriteFile(p, []byte("#!/bin/sh\necho '"+out+"'\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv(EnvGit, p)
}

func TestFindRefusesOldGit(t *testing.T) {
	fakeGit(t, "git version 2.20.1")
	_, err := Find(context.Background())
	if !errors.Is(err, ErrTooOld) {
		t.Fatalf("Find with git 2.20.1: %v, want ErrTooOld", err)
	}
}

func TestFindMissingGitSaysWhatToDo(t *testing.T) {
	t.Setenv(EnvGit, filepath.Join(t.TempDir(), "no-such-git"))
	_, err := Find(context.Background())
	if err == nil {
		t.Fatal("missing git accepted")
	}
	for _, want := range []string{"git not found", EnvGit, "install"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not mention %q", err, want)
		}
	}
}
