package packcache

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// testIndex is an index of dir whose directory listings are counted, on a clock the
// test moves.
type testIndex struct {
	*Index
	reads int
	clock time.Time
}

func openTestIndex(t *testing.T, c Config) *testIndex {
	t.Helper()
	ti := &testIndex{clock: time.Now()}
	var err error
	ti.Index, err = newIndex(c, func(p string) ([]fs.DirEntry, error) {
		ti.reads++
		return os.ReadDir(p)
	}, func() time.Time { return ti.clock })
	if err != nil {
		t.Fatal(err)
	}
	return ti
}

func key(i int) string { return fmt.Sprintf("%02x%062d", i%256, i) }

// put writes a complete entry of size bytes for key, used age ago, as a fill would.
func put(t *testing.T, c Config, k string, size int, used time.Time) string {
	t.Helper()
	p := c.entry(k, ".pack")
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, make([]byte, size), 0o644); err != nil {
		t.Fatal(err)
	}
	os.Chtimes(p, used, used)
	return p
}

// fill makes key's entry through a Fill, as the server does: lock, partial file,
// rename, each step told to the index.
func fill(t *testing.T, c Config, k string, size int) {
	t.Helper()
	f, err := c.Claim(k)
	if err != nil {
		t.Fatal(err)
	}
	res := f.Run(strings.NewReader(strings.Repeat("x", size)), discard{}, func() error { return nil }, func() {})
	if res.Cached != int64(size) {
		t.Fatalf("fill of %d bytes cached %d", size, res.Cached)
	}
}

type discard struct{}

func (discard) Write(p []byte) (int, error) { return len(p), nil }

func onDisk(t *testing.T, dir string) (files int, bytes int64) {
	t.Helper()
	filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			fi, _ := d.Info()
			files++
			bytes += cost(fi.Size())
		}
		return nil
	})
	return files, bytes
}

// A new entry evicts from the index, with no directory listed after the start-up
// walk, and the bounds hold after every insert: files (entries with their lock
// files) and bytes, each file at least a block.
func TestInsertDoesNotWalk(t *testing.T) {
	dir := t.TempDir()
	c := Config{Dir: dir, MaxEntries: 50, MaxBytes: 400 << 10, TTL: time.Hour}.withDefaults()
	if err := Prepare(c); err != nil {
		t.Fatal(err)
	}
	old := time.Now().Add(-time.Minute)
	for i := range 40 {
		put(t, c, key(1000+i), 100, old)
	}
	x := openTestIndex(t, c)
	c.Index = x.Index
	walked := x.reads
	if walked == 0 {
		t.Fatal("the start-up walk listed no directory")
	}
	for i := range 300 {
		fill(t, c, key(i), 10_000)
		files, bytes := x.Counts()
		if files > c.MaxEntries || bytes > c.MaxBytes {
			t.Fatalf("after insert %d the index counts %d files, %d bytes: over %d, %d", i, files, bytes, c.MaxEntries, c.MaxBytes)
		}
		if df, db := onDisk(t, dir); df != files || db != bytes {
			t.Fatalf("after insert %d: %d files, %d bytes on disk, the index counts %d, %d", i, df, db, files, bytes)
		}
	}
	if x.reads != walked {
		t.Fatalf("300 inserts listed %d directories (the start-up walk: %d)", x.reads-walked, walked)
	}
	// The newest entries stayed.
	if _, _, ok := c.Open(key(299)); !ok {
		t.Fatal("the newest entry was evicted")
	}
}

// The least recently used entries go first, and use (Open) counts; entries unused past
// the TTL go whatever the room.
func TestIndexEvictsLeastRecentlyUsed(t *testing.T) {
	dir := t.TempDir()
	c := Config{Dir: dir, MaxBytes: 3 * blockSize, TTL: time.Hour}.withDefaults()
	now := time.Now()
	expired := put(t, c, key(1), 10, now.Add(-2*time.Hour))
	oldest := put(t, c, key(2), 100, now.Add(-30*time.Minute))
	older := put(t, c, key(3), 100, now.Add(-20*time.Minute))
	x := openTestIndex(t, c)
	c.Index = x.Index
	if _, err := os.Stat(expired); err == nil {
		t.Fatal("an entry past its TTL survived the start")
	}
	f, _, ok := c.Open(key(2)) // now the most recent
	if !ok {
		t.Fatal("no entry 2")
	}
	f.Close()
	fill(t, c, key(4), 100) // entry + lock file: 4 blocks with 2 and 3, over 3
	for p, want := range map[string]bool{oldest: true, older: false, c.entry(key(4), ".pack"): true} {
		if _, err := os.Stat(p); (err == nil) != want {
			t.Errorf("%s kept=%v, want %v", filepath.Base(p), err == nil, want)
		}
	}
	x.clock = x.clock.Add(2 * time.Hour)
	fill(t, c, key(5), 100)
	if _, err := os.Stat(oldest); err == nil {
		t.Error("an entry unused past the TTL survived an insert")
	}
}

// The entry bound counts every file: lock and marker files and partly written ones
// too. Idle locks and markers go first, then the least recently used entries; a held
// lock and a fill in progress stay, and a partial file whose fill died goes.
func TestIndexBoundsEveryFile(t *testing.T) {
	dir := t.TempDir()
	c := Config{Dir: dir, MaxEntries: 3, TTL: time.Hour}.withDefaults()
	now := time.Now()
	small := func(k, ext string, age time.Duration) string {
		p := c.entry(k, ext)
		os.MkdirAll(filepath.Dir(p), 0o755)
		os.WriteFile(p, nil, 0o644)
		os.Chtimes(p, now.Add(-age), now.Add(-age))
		return p
	}
	oldPack := put(t, c, key(1), 1, now.Add(-30*time.Minute))
	newPack := put(t, c, key(2), 1, now.Add(-time.Minute))
	idle := small(key(3), ".lock", 20*time.Minute)
	marker := small(key(4), ".nocache", 20*time.Minute)
	x := openTestIndex(t, c)
	c.Index = x.Index
	// A hook's fill in progress, as its report tells the server.
	live, err := c.lockEntry(key(5))
	if err != nil {
		t.Fatal(err)
	}
	defer live.unlock()
	os.MkdirAll(c.tmpDir(), 0o755)
	partial := filepath.Join(c.tmpDir(), key(5)[:16]+"-1.pack")
	os.WriteFile(partial, []byte("x"), 0o644)
	x.Note(Report{Result: Filling, Key: key(5), Tmp: partial})
	// 6 files, bound 3: the idle lock and the marker, then the oldest entry go.
	for p, want := range map[string]bool{oldPack: false, newPack: true, idle: false, marker: false, partial: true, live.f.Name(): true} {
		if _, err := os.Stat(p); (err == nil) != want {
			t.Errorf("%s kept=%v, want %v", filepath.Base(p), err == nil, want)
		}
	}
	if files, _ := x.Counts(); files != 3 {
		t.Errorf("the index counts %d files, want 3", files)
	}
	// The hook is killed with its request: its lock is free, its partial file dead.
	live.unlock()
	fill(t, c, key(6), 1)
	if _, err := os.Stat(partial); err == nil {
		t.Error("a dead fill's partial file survived")
	}
}
