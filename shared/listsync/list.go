package listsync

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"path"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/go-git/go-git/v5/plumbing/filemode"
	"github.com/go-git/go-git/v5/plumbing/object"

	"github.com/mirrorfleet/mirrorfleet/shared/api"
	"github.com/mirrorfleet/mirrorfleet/shared/store"
	"github.com/mirrorfleet/mirrorfleet/shared/urlpolicy"
)

// Limits on what a list may hold. They bound the coordinator's memory whatever is
// pushed to the list repository.
const (
	MaxLineBytes  = 4096      // a longer line is a bad line
	MaxFileBytes  = 256 << 20 // a larger list file fails the sync
	MaxListFiles  = 10000
	maxTextInBad  = 200 // bytes of a bad line kept for the report
	maxReasonRune = 300
)

// ErrPathMissing: a configured list path is not in the commit. It fails the sync
// rather than reading as an empty list (which would try to remove every repo).
var ErrPathMissing = errors.New("list path not found")

// BadLine is a skipped line of the list: file:line, the text, why.
type BadLine struct {
	File   string `json:"file"`
	Line   int    `json:"line"`
	Text   string `json:"text"`
	Reason string `json:"reason"`
}

func (b BadLine) String() string { return fmt.Sprintf("%s:%d: %s", b.File, b.Line, b.Reason) }

// list is the parsed list at one commit: the distinct valid URLs by repo id.
type list struct {
	urls  map[string]string // repo id -> normalized URL
	at    map[string]where  // repo id -> where it is listed, for problems found when adding
	files []string
	bad   []BadLine
}

// badAt is a bad line for the listed repo id, found after parsing (an add refused).
func (l *list) badAt(id, reason string) BadLine {
	w := l.at[id]
	return BadLine{File: l.files[w.file], Line: w.line, Text: clip(l.urls[id], maxTextInBad), Reason: clip(reason, maxReasonRune)}
}

type where struct {
	file int
	line int
}

// parseTree reads the list files of paths in tree. Bad lines are collected, never fatal;
// a missing path or an oversized file is.
func parseTree(tree *object.Tree, paths []string, p urlpolicy.Policy) (*list, error) {
	files, err := listFiles(tree, paths)
	if err != nil {
		return nil, err
	}
	l := &list{urls: map[string]string{}, at: map[string]where{}}
	for _, f := range files {
		l.files = append(l.files, f.Name)
	}
	for fi, f := range files {
		if f.Size > MaxFileBytes {
			return nil, fmt.Errorf("list file %s is %d bytes, over the limit of %d", f.Name, f.Size, MaxFileBytes)
		}
		rc, err := f.Reader()
		if err != nil {
			return nil, fmt.Errorf("read list file %s: %w", f.Name, err)
		}
		err = eachLine(rc, func(n int, line []byte, tooLong bool) {
			if n == 1 {
				line = bytes.TrimPrefix(line, []byte("\xef\xbb\xbf")) // a UTF-8 byte order mark
			}
			text := strings.TrimSpace(stripComment(string(line)))
			if text == "" && !tooLong {
				return
			}
			bad := func(reason string) {
				l.bad = append(l.bad, BadLine{File: f.Name, Line: n, Text: clip(text, maxTextInBad), Reason: clip(reason, maxReasonRune)})
			}
			if tooLong {
				bad(fmt.Sprintf("line longer than %d bytes", MaxLineBytes))
				return
			}
			norm, reason := normalize(p, text)
			if reason != "" {
				bad(reason)
				return
			}
			id := store.RepoID(norm)
			if w, dup := l.at[id]; dup {
				bad(fmt.Sprintf("duplicate of %s:%d", files[w.file].Name, w.line))
				return
			}
			l.at[id] = where{fi, n}
			l.urls[id] = norm
		})
		rc.Close()
		if err != nil {
			return nil, fmt.Errorf("read list file %s: %w", f.Name, err)
		}
	}
	return l, nil
}

// normalize applies the URL policy exactly as api.AddRepo does, so a line that passes
// here is never refused when added (and the ids match what AddRepo stores).
func normalize(p urlpolicy.Policy, raw string) (string, string) {
	norm, e := api.CheckURL(p, raw)
	if e != nil {
		return "", e.Message
	}
	return norm, ""
}

// stripComment drops a # comment: a line starting with #, or # after whitespace. A #
// inside a word is kept, so the URL policy can refuse a URL with a fragment.
func stripComment(s string) string {
	for i := 0; i < len(s); i++ {
		if s[i] == '#' && (i == 0 || s[i-1] == ' ' || s[i-1] == '\t') {
			return s[:i]
		}
	}
	return s
}

func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}

// eachLine calls fn for every line of r (1-based numbers, without the line ending).
// Lines over MaxLineBytes are passed truncated with tooLong set, in bounded memory.
func eachLine(r io.Reader, fn func(n int, line []byte, tooLong bool)) error {
	br := bufio.NewReaderSize(r, 64<<10)
	for n := 1; ; n++ {
		line, err := br.ReadSlice('\n')
		tooLong := false
		if errors.Is(err, bufio.ErrBufferFull) || len(line) > MaxLineBytes {
			tooLong = true
			head := bytes.Clone(line[:min(len(line), MaxLineBytes)])
			for errors.Is(err, bufio.ErrBufferFull) { // skip the rest of the line
				_, err = br.ReadSlice('\n')
			}
			line = head
		}
		if len(line) > 0 || err == nil {
			fn(n, bytes.TrimRight(line, "\r\n"), tooLong)
		}
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
	}
}

// listFiles resolves the configured paths to the list files, in a stable order and each
// once: a file as is, a directory as its *.txt files at any depth (sorted by path).
func listFiles(tree *object.Tree, paths []string) ([]*object.File, error) {
	var out []*object.File
	seen := map[string]bool{}
	add := func(f *object.File) error {
		if seen[f.Name] {
			return nil
		}
		if len(out) == MaxListFiles {
			return fmt.Errorf("the list paths hold more than %d files", MaxListFiles)
		}
		seen[f.Name] = true
		out = append(out, f)
		return nil
	}
	for _, raw := range paths {
		p, err := cleanPath(raw)
		if err != nil {
			return nil, err
		}
		dir := tree
		if p != "." {
			e, err := tree.FindEntry(p)
			if err != nil {
				return nil, fmt.Errorf("%w: %s", ErrPathMissing, p)
			}
			switch {
			case e.Mode == filemode.Regular || e.Mode == filemode.Executable:
				f, err := tree.File(p)
				if err != nil {
					return nil, fmt.Errorf("list file %s: %w", p, err)
				}
				if err := add(f); err != nil {
					return nil, err
				}
				continue
			case e.Mode == filemode.Dir:
				if dir, err = tree.Tree(p); err != nil {
					return nil, fmt.Errorf("list directory %s: %w", p, err)
				}
			default:
				return nil, fmt.Errorf("list path %s is neither a file nor a directory (mode %s)", p, e.Mode)
			}
		}
		var files []*object.File
		err = dir.Files().ForEach(func(f *object.File) error {
			if strings.HasSuffix(f.Name, ".txt") && (f.Mode == filemode.Regular || f.Mode == filemode.Executable) {
				if p != "." {
					f.Name = path.Join(p, f.Name) // report paths from the repository root
				}
				files = append(files, f)
			}
			return nil
		})
		if err != nil {
			return nil, fmt.Errorf("list directory %s: %w", p, err)
		}
		slices.SortFunc(files, func(a, b *object.File) int { return strings.Compare(a.Name, b.Name) })
		for _, f := range files {
			if err := add(f); err != nil {
				return nil, err
			}
		}
	}
	return out, nil
}
