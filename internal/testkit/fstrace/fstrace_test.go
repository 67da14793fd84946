package fstrace

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestParse(t *testing.T) {
	rec := `100  openat(AT_FDCWD</work>, "/m/a.git/HEAD", O_RDONLY|O_CLOEXEC) = 3</m/a.git/HEAD>
100  read(3</m/a.git/HEAD>, ""..., 512) = 23
101  openat(AT_FDCWD</m/a.git>, "objects/pack", O_RDONLY|O_DIRECTORY) = 4</m/a.git/objects/pack>
101  getdents64(4</m/a.git/objects/pack>,  <unfinished ...>
100  newfstatat(AT_FDCWD</work>, "rel/x", 0x1, 0) = -1 ENOENT (No such file or directory)
101  <... getdents64 resumed>0x1 /* 4 entries */, 32768) = 120
101  --- SIGURG {si_signo=SIGURG} ---
100  newfstatat(3</m/a.git/HEAD>, "", {st_mode=S_IFREG|0644, st_size=23, ...}, AT_EMPTY_PATH) = 0
100  mmap(NULL, 65536, PROT_READ, MAP_PRIVATE, 5</m/a.git/objects/pack/p.idx>, 0) = 0x7f1234560000
100  renameat2(AT_FDCWD</m>, "a.git/tmp", AT_FDCWD</m>, "a.git/packed-refs", 0) = 0
100  chdir("/m/a.git") = 0
100  lstat("config", 0x2) = 0
100  flock(6</m/.locks/a.git.lock>, LOCK_EX|LOCK_NB) = 0
100  write(1</dev/pts/0>, ""..., 4) = 4
101  +++ exited with 0 +++
`
	calls, err := Parse(strings.NewReader(rec))
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, c := range calls {
		s := fmt.Sprintf("%d %s %v %d", c.PID, c.Name, c.Paths, c.Ret)
		if c.Errno != "" {
			s += " " + c.Errno
		}
		if c.MapLen > 0 {
			s += fmt.Sprintf(" len %d", c.MapLen)
		}
		got = append(got, s)
	}
	want := []string{
		"100 openat [/m/a.git/HEAD] 3",
		"100 read [/m/a.git/HEAD] 23",
		"101 openat [/m/a.git/objects/pack] 4",
		"101 getdents64 [/m/a.git/objects/pack] 120",
		"100 newfstatat [/work/rel/x] -1 ENOENT",
		"100 newfstatat [/m/a.git/HEAD] 0",
		"100 mmap [/m/a.git/objects/pack/p.idx] 139716164190208 len 65536",
		"100 renameat2 [/m/a.git/tmp /m/a.git/packed-refs] 0",
		"100 chdir [/m/a.git] 0",
		"100 lstat [/m/a.git/config] 0",
		"100 flock [/m/.locks/a.git.lock] 0",
		"100 write [/dev/pts/0] 4",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("parsed:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if n := len(Under(calls, "/m/a.git")); n != 9 {
		t.Errorf("Under(/m/a.git) = %d calls, want 9", n)
	}
	if n := len(Under(calls, "/m/a")); n != 0 {
		t.Errorf("Under(/m/a) = %d calls: a prefix of a name is not a parent", n)
	}
}

// A real record: a shell that reads one file and lists a directory between two marks
// is seen doing exactly that, and nothing of the files it leaves alone.
func TestRecordOfARealProcess(t *testing.T) {
	ForTest(t)
	dir := t.TempDir()
	root := filepath.Join(dir, "root")
	if err := os.MkdirAll(filepath.Join(root, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "sub", "f"), []byte("hello\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "untouched"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	begin, end := filepath.Join(dir, "begin"), filepath.Join(dir, "end")
	out := filepath.Join(dir, "trace")
	cmd, err := Command(context.Background(), out, "sh", "-c",
		fmt.Sprintf("cat %s/begin 2>/dev/null; cd %s && cat sub/f >/dev/null && ls sub >/dev/null; cat %s/end 2>/dev/null; true", dir, root, dir))
	if err != nil {
		t.Fatal(err)
	}
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("%v: %s", err, b)
	}
	calls, err := ParseFile(out)
	if err != nil {
		t.Fatal(err)
	}
	mid, err := Between(calls, begin, end)
	if err != nil {
		t.Fatal(err)
	}
	touched := map[string]bool{}
	for _, c := range Under(mid, root) {
		for _, p := range c.Paths {
			touched[p] = true
		}
	}
	for _, p := range []string{filepath.Join(root, "sub", "f"), filepath.Join(root, "sub")} {
		if !touched[p] {
			t.Errorf("%s not seen touched; seen %v", p, touched)
		}
	}
	if touched[filepath.Join(root, "untouched")] {
		t.Errorf("a file nobody named was seen touched")
	}
	var reads int64
	for _, c := range Under(mid, filepath.Join(root, "sub", "f")) {
		if c.Name == "read" {
			reads += c.Ret
		}
	}
	if reads != 6 {
		t.Errorf("read %d bytes of sub/f, want 6", reads)
	}
	if len(Under(calls[:0], root)) != 0 {
		t.Error("no calls, yet some under root")
	}
}
