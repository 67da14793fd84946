// Package repogen generates git repositories of a chosen pack size for the benchmarks
// (source-like text history plus incompressible binary assets) and small upstream
// changes to them, with git fast-import.
package repogen

import (
	"bufio"
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/mirrorfleet/mirrorfleet/internal/testkit/gittest"
)

// Plan shapes a generated history so that its pack comes out near a target size:
// source-like text files that many commits edit a few lines of (small deltas, many
// objects), and binary assets of random bytes (incompressible, no deltas) that carry
// most of the bytes of the larger sizes, as vendored archives and images do.
type Plan struct {
	Commits     int   // on main, linear
	TextFiles   int   // text files of the first commit
	BinaryBytes int64 // total size of all binary asset versions
	BinaryMax   int64 // largest binary asset; the smallest is BinaryMax/32
	TagEvery    int   // an annotated tag every this many commits
	BranchEvery int   // a release branch every this many commits
}

// Estimated compressed pack bytes per unit of text history; calibrated against
// fast-import's packs of this generator's text (see TestGenerateSizeAndFsck).
const (
	packBytesPerCommit   = 1050 // commit, changed trees and the delta of each edit
	packBytesPerTextFile = 3150 // a text file of the first commit (~5.6 KB raw) and its history of deltas
)

// PlanFor sizes a history for a pack of about target bytes.
func PlanFor(target int64) Plan {
	p := Plan{
		Commits:  int(clamp(target/25_000, 150, 20_000)),
		TagEvery: 50,
	}
	p.TextFiles = int(clamp(int64(p.Commits)/6, 40, 3_000))
	p.BranchEvery = max(p.Commits/8, 20)
	text := int64(p.Commits)*packBytesPerCommit + int64(p.TextFiles)*packBytesPerTextFile
	p.BinaryBytes = max(target-text, target/10)
	p.BinaryMax = clamp(target/40, 64<<10, 8<<20)
	return p
}

func clamp(v, lo, hi int64) int64 { return min(max(v, lo), hi) }

// Generator writes a fast-import stream of a plan's history and remembers the final
// state of the tree, so that later small changes (a developer's push) can follow.
//
// fast-import deltas a blob only against the blob written just before it, so the
// text stream first writes every version of one text file after the other (each a
// small delta of the previous, as in a repacked repository), then the commits, which
// name those blobs by mark. Binary assets go first, in a stream of their own, stored
// without compression or delta attempts: zlib stores random bytes uncompressed at
// any level, so the pack is the same and generating it several times faster.
type Generator struct {
	plan  Plan
	rng   *rand.Rand
	bytes *rand.ChaCha8 // random bytes for binary assets
	words []string

	files   map[string][]string // live text file path: its final lines
	paths   []string            // live text file paths, sorted, for deterministic picks
	assets  []string            // binary asset paths
	commits int                 // commits written so far (dates them)
	marks   int
}

// op is one file operation of a scheduled commit.
type op struct {
	kind opKind
	path string
	mark int   // the blob written
	size int64 // the size of a binary write
}

type opKind int

const (
	opText opKind = iota // a new version (or the first) of a text file
	opDelete
	opBinary
)

func newGenerator(p Plan, seed uint64) *Generator {
	var key [32]byte
	for i := range 8 {
		key[i] = byte(seed >> (8 * i))
	}
	g := &Generator{
		plan:  p,
		rng:   rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)),
		bytes: rand.NewChaCha8(key),
		files: map[string][]string{},
	}
	g.words = vocabulary(g.rng)
	return g
}

// vocabulary is a fixed mix of keywords and identifiers, so text compresses about as
// well as source code does (3-4x).
func vocabulary(rng *rand.Rand) []string {
	w := strings.Fields(`func return if else for range var const type struct interface map
		chan go defer select case switch break continue package import nil true false err
		ctx string int int64 byte error bool len cap make append copy delete new panic`)
	syll := []string{"re", "po", "mir", "ror", "fetch", "sync", "ref", "pack", "tree", "blob",
		"obj", "dir", "path", "url", "hash", "lock", "list", "head", "tag", "conf", "log", "err"}
	for range 400 {
		var b strings.Builder
		for j := range 2 + rng.IntN(3) {
			s := syll[rng.IntN(len(syll))]
			if j > 0 {
				s = strings.ToUpper(s[:1]) + s[1:]
			}
			b.WriteString(s)
		}
		w = append(w, b.String())
	}
	return w
}

// line is one line of pseudo source code.
func (g *Generator) line() string {
	var b strings.Builder
	b.WriteString(strings.Repeat("\t", g.rng.IntN(4)))
	for i := range 2 + g.rng.IntN(9) {
		if i > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(g.words[g.rng.IntN(len(g.words))])
		if g.rng.IntN(8) == 0 {
			fmt.Fprintf(&b, "(%d)", g.rng.IntN(1000))
		}
	}
	return b.String()
}

func (g *Generator) newText() []string {
	lines := make([]string, 40+g.rng.IntN(200))
	for i := range lines {
		lines[i] = g.line()
	}
	return lines
}

// edit changes a few lines of a file: replacements, insertions, deletions.
func (g *Generator) edit(lines []string) []string {
	for range 1 + g.rng.IntN(8) {
		i := g.rng.IntN(len(lines) + 1)
		switch op := g.rng.IntN(3); {
		case op == 0 && i < len(lines):
			lines[i] = g.line()
		case op == 1 && i < len(lines) && len(lines) > 10:
			lines = append(lines[:i], lines[i+1:]...)
		default:
			lines = append(lines[:i], append([]string{g.line()}, lines[i:]...)...)
		}
	}
	return lines
}

// newTextPath names a new text file in one of the package directories.
func (g *Generator) newTextPath() string {
	dirs := max(g.plan.TextFiles/25, 1)
	for {
		p := fmt.Sprintf("src/pkg%03d/file%06d.go", g.rng.IntN(dirs), g.rng.IntN(1_000_000))
		if _, ok := g.files[p]; !ok {
			return p
		}
	}
}

// binarySize draws an asset size, log-uniform between BinaryMax/32 and BinaryMax.
func (g *Generator) binarySize() int64 {
	lo := float64(g.plan.BinaryMax) / 32
	return int64(lo * math.Exp2(5*g.rng.Float64()))
}

// fastImport is a fast-import stream writer.
type fastImport struct {
	w   *bufio.Writer
	err error
}

func (f *fastImport) printf(format string, args ...any) {
	if f.err == nil {
		_, f.err = fmt.Fprintf(f.w, format, args...)
	}
}

func (f *fastImport) data(b []byte) {
	f.printf("data %d\n", len(b))
	if f.err == nil {
		_, f.err = f.w.Write(b)
	}
	f.printf("\n")
}

// signature is the fixed identity with the date of commit n.
func (g *Generator) signature(n int) string {
	ts := gittest.CommitBase.Add(time.Duration(n) * time.Hour).Unix()
	return fmt.Sprintf("%s <%s> %d +0000", gittest.AuthorName, gittest.AuthorEmail, ts)
}

func join(lines []string) []byte { return []byte(strings.Join(lines, "\n") + "\n") }

// schedule decides what every commit of the history does, keeping the set of live
// text files in g.files (with nil content: it is generated later, file by file).
func (g *Generator) schedule() [][]op {
	p := g.plan
	add := func(ops []op) []op {
		path := g.newTextPath()
		g.files[path] = nil
		g.paths = insertString(g.paths, path)
		return append(ops, op{kind: opText, path: path})
	}
	commits := make([][]op, p.Commits)
	for range p.TextFiles {
		commits[0] = add(commits[0])
	}
	var binaryDone int64
	for n := 1; n < p.Commits; n++ {
		var ops []op
		edited := map[string]bool{}
		for range 1 + g.rng.IntN(4) {
			path := g.paths[g.rng.IntN(len(g.paths))]
			if !edited[path] {
				edited[path] = true
				ops = append(ops, op{kind: opText, path: path})
			}
		}
		switch r := g.rng.IntN(100); {
		case r < 4:
			ops = add(ops)
		case r < 5 && len(g.paths) > 10:
			victim := g.paths[g.rng.IntN(len(g.paths))]
			if !edited[victim] {
				delete(g.files, victim)
				g.paths = removeString(g.paths, victim)
				ops = append(ops, op{kind: opDelete, path: victim})
			}
		}
		// Binary versions spread evenly over the history.
		for binaryDone < p.BinaryBytes*int64(n)/int64(p.Commits-1) {
			o := op{kind: opBinary, path: g.assetPath(), size: g.binarySize()}
			binaryDone += o.size
			ops = append(ops, o)
		}
		commits[n] = ops
	}
	return commits
}

// assetPath is a new asset, or (one time in three) a new version of an existing one.
func (g *Generator) assetPath() string {
	if len(g.assets) > 0 && g.rng.IntN(3) == 0 {
		return g.assets[g.rng.IntN(len(g.assets))]
	}
	p := fmt.Sprintf("assets/%02d/blob%05d.bin", len(g.assets)%20, len(g.assets))
	g.assets = append(g.assets, p)
	return p
}

// writeBlobs writes every version of every text file, file after file, marks them
// in the schedule, and leaves each live file's final lines in g.files.
func (g *Generator) writeBlobs(f *fastImport, commits [][]op) {
	versions := map[string][]*op{}
	var order []string
	for n := range commits {
		for i := range commits[n] {
			o := &commits[n][i]
			if o.kind != opText {
				continue
			}
			if versions[o.path] == nil {
				order = append(order, o.path)
			}
			versions[o.path] = append(versions[o.path], o)
		}
	}
	for _, path := range order {
		var lines []string
		for i, o := range versions[path] {
			if i == 0 {
				lines = g.newText()
			} else {
				lines = g.edit(lines)
			}
			g.marks++
			o.mark = g.marks
			f.printf("blob\nmark :%d\n", o.mark)
			f.data(join(lines))
		}
		if _, live := g.files[path]; live {
			g.files[path] = lines
		}
	}
}

// commit writes one commit on ref; from is its parent ("" for none).
func (g *Generator) commit(f *fastImport, ref, from, msg string, ops []op) {
	g.commits++
	g.marks++
	sig := g.signature(g.commits)
	f.printf("commit %s\nmark :%d\nauthor %s\ncommitter %s\n", ref, g.marks, sig, sig)
	f.data([]byte(msg))
	if from != "" {
		f.printf("from %s\n", from)
	}
	for _, o := range ops {
		switch o.kind {
		case opText, opBinary:
			f.printf("M 100644 :%d %s\n", o.mark, o.path)
		case opDelete:
			f.printf("D %s\n", o.path)
		}
	}
	f.printf("\n")
}

// writeBinaries writes every binary asset version, in commit order, and marks them
// in the schedule.
func (g *Generator) writeBinaries(f *fastImport, commits [][]op) {
	for n := range commits {
		for i := range commits[n] {
			o := &commits[n][i]
			if o.kind != opBinary || f.err != nil {
				continue
			}
			b := make([]byte, o.size)
			_, _ = g.bytes.Read(b) // ChaCha8.Read never fails
			g.marks++
			o.mark = g.marks
			f.printf("blob\nmark :%d\n", o.mark)
			f.data(b)
		}
	}
}

// history writes the text blobs and the commits of main, with tags and release
// branches; the binary blobs must have been written (writeBinaries) already.
func (g *Generator) history(f *fastImport, commits [][]op) {
	p := g.plan
	g.writeBlobs(f, commits)
	for n, ops := range commits {
		if f.err != nil {
			return
		}
		from := ""
		if n > 0 {
			from = fmt.Sprintf(":%d", g.marks)
		}
		g.commit(f, "refs/heads/main", from, fmt.Sprintf("change %d\n\n%d files\n", n, len(ops)), ops)
		if n > 0 && n%p.TagEvery == 0 {
			f.printf("tag v%d.%d\nfrom :%d\ntagger %s\n", n/p.TagEvery/10, n/p.TagEvery%10, g.marks, g.signature(g.commits))
			f.data([]byte(fmt.Sprintf("release %d\n", n/p.TagEvery)))
		}
		if n > 0 && n%p.BranchEvery == 0 {
			f.printf("reset refs/heads/release-%d\nfrom :%d\n\n", n/p.BranchEvery, g.marks)
		}
	}
}

func insertString(s []string, v string) []string {
	i := sort.SearchStrings(s, v)
	return append(s[:i], append([]string{v}, s[i:]...)...)
}

func removeString(s []string, v string) []string {
	i := sort.SearchStrings(s, v)
	if i < len(s) && s[i] == v {
		return append(s[:i], s[i+1:]...)
	}
	return s
}

// smallChange writes one more commit on main that edits two text files and adds one:
// the typical push a poll then finds.
func (g *Generator) smallChange(f *fastImport) {
	var ops []op
	for range 2 {
		path := g.paths[g.rng.IntN(len(g.paths))]
		g.files[path] = g.edit(g.files[path])
		ops = append(ops, g.inlineText(f, path))
	}
	path := g.newTextPath()
	g.files[path] = g.newText()
	g.paths = insertString(g.paths, path)
	ops = append(ops, g.inlineText(f, path))
	g.commit(f, "refs/heads/main", "refs/heads/main^0", fmt.Sprintf("small change %d\n", g.commits), ops)
}

// inlineText writes path's current content as a blob and returns the op that uses it.
func (g *Generator) inlineText(f *fastImport, path string) op {
	g.marks++
	f.printf("blob\nmark :%d\n", g.marks)
	f.data(join(g.files[path]))
	return op{kind: opText, path: path, mark: g.marks}
}

// importInto runs `git fast-import` in the bare repository gitDir with the stream
// write produces; gitOpts go before the command, opts after it.
func importInto(ctx context.Context, gitDir string, gitOpts, opts []string, write func(*fastImport)) error {
	args := append(append(slices.Clone(gitOpts), "--git-dir="+gitDir, "fast-import", "--quiet", "--done"), opts...)
	cmd := exec.CommandContext(ctx, "git", args...)
	// glibc returns freed memory to the kernel after every large object by default;
	// on small VMs the brk churn makes fast-import ~10x slower. Generation only: no
	// measured git command runs with this.
	cmd.Env = append(gittest.Env(""), "MALLOC_TOP_PAD_=67108864", "MALLOC_TRIM_THRESHOLD_=268435456")
	var stderr strings.Builder
	cmd.Stderr = &stderr
	in, err := cmd.StdinPipe()
	if err != nil {
		return fmt.Errorf("fast-import: %w", err)
	}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("fast-import: %w", err)
	}
	f := &fastImport{w: bufio.NewWriterSize(in, 1<<20)}
	write(f)
	f.printf("done\n")
	if f.err == nil {
		f.err = f.w.Flush()
	}
	closeErr := in.Close()
	if err := cmd.Wait(); err != nil {
		return fmt.Errorf("fast-import: %w: %s", err, stderr.String())
	}
	if f.err != nil {
		return fmt.Errorf("fast-import stream: %w", f.err)
	}
	if closeErr != nil {
		return fmt.Errorf("fast-import stream: %w", closeErr)
	}
	return nil
}

// Create makes a bare repository at gitDir (HEAD refs/heads/main) holding the
// planned history in two packs (binary assets, the rest), and returns the generator
// for later changes.
func Create(ctx context.Context, gitDir string, p Plan, seed uint64) (*Generator, error) {
	if err := GitRun(ctx, "", "init", "-q", "--bare", "-b", "main", gitDir); err != nil {
		return nil, err
	}
	g := newGenerator(p, seed)
	commits := g.schedule()
	marks := filepath.Join(gitDir, "generator-marks")
	defer os.Remove(marks)
	packed := []string{"-c", "fastimport.unpackLimit=0"} // a pack even for a few objects
	stored := append(slices.Clone(packed), "-c", "core.compression=0")
	err := importInto(ctx, gitDir, stored, []string{"--big-file-threshold=1k", "--export-marks=" + marks},
		func(f *fastImport) { g.writeBinaries(f, commits) })
	if err != nil {
		return nil, fmt.Errorf("binary assets: %w", err)
	}
	err = importInto(ctx, gitDir, packed, []string{"--import-marks=" + marks},
		func(f *fastImport) { g.history(f, commits) })
	if err != nil {
		return nil, fmt.Errorf("history: %w", err)
	}
	return g, nil
}

// PushSmallChange adds one small commit to main of the repository g generated, as a
// push would (a handful of objects: loose, as receive-pack leaves them).
func PushSmallChange(ctx context.Context, gitDir string, g *Generator) error {
	return importInto(ctx, gitDir, nil, nil, g.smallChange)
}

// GitRun runs git in the isolated environment and returns an error with its output.
func GitRun(ctx context.Context, dir string, args ...string) error {
	_, err := GitOutput(ctx, dir, args...)
	return err
}

// GitOutput runs git in the isolated environment and returns its trimmed output.
func GitOutput(ctx context.Context, dir string, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, "git", args...)
	cmd.Dir = dir
	cmd.Env = gittest.Env("")
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("git %s: %w: %s", strings.Join(args, " "), err, stderr.String())
	}
	return strings.TrimSpace(string(out)), nil
}

// PackBytes is the total size of the pack files of the repository at gitDir.
func PackBytes(gitDir string) (n int64, count int, err error) {
	packs, err := filepath.Glob(filepath.Join(gitDir, "objects", "pack", "*.pack"))
	if err != nil {
		return 0, 0, err
	}
	for _, p := range packs {
		fi, err := os.Stat(p)
		if err != nil {
			return 0, 0, fmt.Errorf("pack size: %w", err)
		}
		n += fi.Size()
	}
	return n, len(packs), nil
}

// RefsOf lists the refs of a repository, one "hash name" a line, sorted by name.
func RefsOf(ctx context.Context, gitDir string) (string, error) {
	return GitOutput(ctx, "", "--git-dir="+gitDir, "for-each-ref", "--format=%(objectname) %(refname)")
}
