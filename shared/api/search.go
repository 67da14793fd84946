package api

import (
	"bytes"
	"context"
	"strings"

	"github.com/mirrorfleet/mirrorfleet/shared/store"
)

// repoSearcher is a store that scans its repos in one read and skips those whose stored
// bytes cannot match before decoding them (bolt). Other stores are searched through
// ListRepos with the scan budget.
type repoSearcher interface {
	SearchRepos(ctx context.Context, cursor string, limit, budget int, maybe func(raw []byte) bool, match func(store.Repo) bool) ([]store.Repo, string, error)
}

// searchBudget bounds the repos one search of a repoSearcher reads: skipping a repo by
// its bytes costs about a microsecond, so a request reads 10 times scanBudget in about
// the time scanBudget decoded repos take.
const searchBudget = 10 * scanBudget

// search is the status page's search: a page of the repos q matches, and the cursor to
// go on from.
func (s *server) search(ctx context.Context, q pageQuery) ([]store.Repo, string, error) {
	rs, ok := s.cfg.Store.(repoSearcher)
	if !ok {
		return s.listMatching(ctx, q.Cursor, q.Limit, q.match)
	}
	maybe, budget := rawMaybe(q.Q), searchBudget
	if maybe == nil {
		budget = scanBudget // every repo read is decoded
	}
	return rs.SearchRepos(ctx, q.Cursor, q.Limit, budget, maybe, q.match)
}

// rawMaybe is a test on a repo's stored JSON that is false only for repos q cannot
// match: the text q, ignoring ASCII case, appears nowhere in it. Each repo field q is
// matched against (URL, id, last error) is stored as a JSON string, which holds any run
// of plain characters as is; for a q with a character JSON may escape (quotes,
// backslash, <, >, &, controls, non-ASCII) it is nil and every repo is decoded.
func rawMaybe(q string) func([]byte) bool {
	if q == "" {
		return nil
	}
	for i := 0; i < len(q); i++ {
		if c := q[i]; c < 0x20 || c >= 0x7f || strings.IndexByte(`"\<>&`, c) >= 0 {
			return nil
		}
	}
	want := []byte(strings.ToLower(q))
	var buf []byte
	return func(raw []byte) bool {
		buf = append(buf[:0], raw...)
		for i, c := range buf {
			if 'A' <= c && c <= 'Z' {
				buf[i] = c + 'a' - 'A'
			}
		}
		return bytes.Contains(buf, want)
	}
}
