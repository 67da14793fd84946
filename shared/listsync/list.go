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

	"github.com/mirrorfleet/mirrorfleet/shared/repos"
	"github.com/mirrorfleet/mirrorfleet/shared/urlpolicy"
)

// Limits on what a list may hold. They bound the coordinator's memory whatever is
// pushed to the list repository: the bytes read (Config.MaxBytes), the URLs kept
// (Config.MaxURLs), and of the bad lines only the first MaxBadLinesKept and counts.
const (
	MaxLineBytes  = 4096 // a longer line is a bad line
	MaxListFiles  = 10000
	maxTextInBad  = 200 // bytes of a bad line kept for the report
	maxReasonRune = 300
)

// Codes of bad lines besides the URL policy's refusal reasons (urlpolicy.Reason).
const (
	BadTooLong   = "too_long"
	BadDuplicate = "duplicate"
	BadPathTaken = "mirror_path_taken" // another stored repo holds the line's mirror path
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

// list is the parsed list at one commit: the distinct valid URLs by repo id
// (repos.ID: on a host whose paths are case-insensitive, two lines naming a repo in
// different cases are one repo, the second a duplicate).
type list struct {
	policy   urlpolicy.Policy
	urls     map[string]string // repo id -> normalized URL
	given    map[string]string // repo id -> the URL as written (".git" kept), where it differs
	at       map[string]where  // repo id -> where it is listed, for duplicates and problems found when adding
	files    []string
	bad      []BadLine // the first MaxBadLinesKept
	badTotal int
	badBy    map[string]int // bad lines by code
}

// addBad counts a bad line and keeps it if fewer than MaxBadLinesKept are kept.
func (l *list) addBad(code string, b BadLine) {
	l.badTotal++
	l.badBy[code]++
	if len(l.bad) < MaxBadLinesKept {
		l.bad = append(l.bad, b)
	}
}

// givenOf is the URL a listed repo is added with: as written in the list, ".git" kept
// (its upstream), for the normalized URL norm.
func (l *list) givenOf(norm string) string {
	if g, ok := l.given[l.id(norm)]; ok {
		return g
	}
	return norm
}

// id is the id a listed URL's repo is stored under (repos.ID).
func (l *list) id(norm string) string { return repos.ID(l.policy, norm) }

// badAt is a bad line for the listed repo id, found after parsing (an add refused).
func (l *list) badAt(id, reason string) BadLine {
	w := l.at[id]
	return BadLine{File: l.files[w.file], Line: w.line, Text: clip(l.urls[id], maxTextInBad), Reason: clip(reason, maxReasonRune)}
}

type where struct {
	file int
	line int
}

// parseTree reads the list files of paths in tree. Bad lines are counted, never fatal;
// a missing path, list files over maxBytes in all, or more than maxURLs valid URLs are.
func parseTree(tree *object.Tree, paths []string, p urlpolicy.Policy, maxBytes int64, maxURLs int) (*list, error) {
	files, err := listFiles(tree, paths)
	if err != nil {
		return nil, err
	}
	var total int64
	for _, f := range files {
		if total += f.Size; total > maxBytes {
			return nil, fmt.Errorf("the list files hold more than %d bytes (at %s); raise the limit (--list-max-bytes, %s) if that is meant", maxBytes, f.Name, EnvMaxBytes)
		}
	}
	l := &list{policy: p, urls: map[string]string{}, given: map[string]string{}, at: map[string]where{}, badBy: map[string]int{}}
	for _, f := range files {
		l.files = append(l.files, f.Name)
	}
	tooMany := false
	for fi, f := range files {
		rc, err := f.Reader()
		if err != nil {
			return nil, fmt.Errorf("read list file %s: %w", f.Name, err)
		}
		err = EachEntry(rc, func(n int, text string, tooLong bool) {
			bad := func(code, reason string) {
				l.addBad(code, BadLine{File: f.Name, Line: n, Text: clip(text, maxTextInBad), Reason: clip(reason, maxReasonRune)})
			}
			if tooLong {
				bad(BadTooLong, fmt.Sprintf("line longer than %d bytes", MaxLineBytes))
				return
			}
			norm, code, reason := normalize(p, text)
			if reason != "" {
				bad(code, reason)
				return
			}
			id := l.id(norm)
			if w, dup := l.at[id]; dup {
				bad(BadDuplicate, fmt.Sprintf("duplicate of %s:%d", files[w.file].Name, w.line))
				return
			}
			if len(l.urls) == maxURLs {
				tooMany = true
				return
			}
			l.at[id] = where{fi, n}
			l.urls[id] = norm
			if up, err := p.Upstream(text); err == nil && up != norm {
				l.given[id] = up
			}
		})
		rc.Close()
		if err != nil {
			return nil, fmt.Errorf("read list file %s: %w", f.Name, err)
		}
		if tooMany {
			return nil, fmt.Errorf("the list holds more than %d URLs (at %s); raise the limit (--list-max-urls, %s) if that is meant", maxURLs, f.Name, EnvMaxURLs)
		}
	}
	return l, nil
}

// normalize checks a line as repos.Add does (repos.Check), so a line that passes here
// is never refused when added (and the ids match what Add stores). A refusal comes
// with its code (the policy's reason) and message.
func normalize(p urlpolicy.Policy, raw string) (norm, code, reason string) {
	norm, err := repos.Check(p, raw)
	if err != nil {
		code = string(urlpolicy.ReasonMalformed)
		var re *repos.Error
		if errors.As(err, &re) && re.Reason != "" {
			code = string(re.Reason)
		}
		return "", code, err.Error()
	}
	return norm, "", ""
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

// EachEntry calls fn with every entry of a list file read from r: its line number and
// its text, trimmed, without comments; blank lines and comments are skipped, and a
// UTF-8 byte order mark is dropped. A line over MaxLineBytes comes cut, with tooLong
// set. Memory stays bounded whatever r holds.
func EachEntry(r io.Reader, fn func(n int, text string, tooLong bool)) error {
	return eachLine(r, func(n int, line []byte, tooLong bool) {
		if n == 1 {
			line = bytes.TrimPrefix(line, []byte("\xef\xbb\xbf"))
		}
		if text := strings.TrimSpace(stripComment(string(line))); text != "" || tooLong {
			fn(n, text, tooLong)
		}
	})
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
