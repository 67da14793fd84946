package api

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"path/filepath"
	"strconv"
	"time"

	"github.com/mirrorfleet/mirrorfleet/shared/mirrorpath"
	"github.com/mirrorfleet/mirrorfleet/shared/store"
)

// GET /tunasync.json: the repos as tunasync's manager lists its jobs, so a mirror
// site's existing status page (and its monitoring) reads the fleet as it reads
// tunasync. The array is streamed: the store is read a page at a time and each job
// encoded as it is read, so a million repos never make one document in memory.
// With ?limit=N one page is answered, and a Link header (rel="next") names the next
// (clients behind a proxy that buffers whole responses, the Lambda API's 6 MB cap).

// TunasyncJob is one repo in tunasync's job form.
type TunasyncJob struct {
	Name           string `json:"name"` // the mirror path, as the clone URL ends
	IsMaster       bool   `json:"is_master"`
	Status         string `json:"status"`
	LastUpdate     string `json:"last_update"`    // last success, "2006-01-02 15:04:05 -0700"; never: the zero time
	LastUpdateTS   int64  `json:"last_update_ts"` // unix seconds; never: -62135596800, the zero time's
	LastStarted    string `json:"last_started"`
	LastStartedTS  int64  `json:"last_started_ts"`
	LastEnded      string `json:"last_ended"`
	LastEndedTS    int64  `json:"last_ended_ts"`
	NextSchedule   string `json:"next_schedule"`
	NextScheduleTS int64  `json:"next_schedule_ts"`
	Upstream       string `json:"upstream"`
	Size           string `json:"size"` // "12.3M"; "unknown" before the first clone
	ErrorMsg       string `json:"error_msg,omitempty"`
}

// tunasyncStatus maps a repo state to tunasync's job status:
//
//	ok       success      the last fetch succeeded
//	failing  failed       its clone failed, or fetches keep failing
//	gone     failed       the upstream answers "not found" (mirror kept)
//	cloning  syncing      held by a worker, first clone queued or running
//	pending  pre-syncing  waiting for a worker
//	overflow paused       handed back by a full worker, waiting for room
//	deleting disabled     being removed
func tunasyncStatus(st store.RepoState) string {
	switch st {
	case store.RepoOK:
		return "success"
	case store.RepoFailing, store.RepoGone:
		return "failed"
	case store.RepoCloning:
		return "syncing"
	case store.RepoPending:
		return "pre-syncing"
	case store.RepoOverflow:
		return "paused"
	}
	return "disabled"
}

// tunaTime is a time as tunasync writes it, text and unix seconds. A time that never
// came is Go's zero time, "0001-01-01 00:00:00 +0000" and -62135596800, as tunasync
// writes its own (its textTime cannot parse anything else, "" included).
func tunaTime(t time.Time) (string, int64) {
	return t.UTC().Format("2006-01-02 15:04:05 -0700"), t.Unix()
}

// humanSize is a size as du -h writes it and tunasync shows it: 512, 1.5K, 12.3M, 2.0G.
func humanSize(n int64) string {
	if n < 1024 {
		return strconv.FormatInt(n, 10)
	}
	f, units := float64(n), "KMGTPE"
	i := -1
	for f >= 1024 && i < len(units)-1 {
		f /= 1024
		i++
	}
	return strconv.FormatFloat(f, 'f', 1, 64) + string(units[i])
}

func (s *server) tunasyncJob(r store.Repo, sc *schedule) TunasyncJob {
	name := r.URL
	if rel, err := mirrorpath.Rel(r.URL); err == nil {
		name = filepath.ToSlash(rel)
	}
	j := TunasyncJob{Name: name, IsMaster: true, Status: tunasyncStatus(r.State), Upstream: r.FetchURL(), Size: "unknown"}
	if r.SizeBytes > 0 || r.State == store.RepoOK {
		j.Size = humanSize(r.SizeBytes)
	}
	j.LastUpdate, j.LastUpdateTS = tunaTime(r.LastSuccessAt)
	// A poll's start is not recorded: the last poll stands for both ends.
	checked := sc.LastChecked(r)
	j.LastStarted, j.LastStartedTS = tunaTime(checked)
	j.LastEnded, j.LastEndedTS = tunaTime(checked)
	next, _ := sc.NextPoll(r) // zero when no worker can say
	j.NextSchedule, j.NextScheduleTS = tunaTime(next)
	if r.State == store.RepoFailing || r.State == store.RepoGone {
		j.ErrorMsg = r.LastError
	}
	return j
}

const tunasyncPage = 1000

func (s *server) tunasync(w http.ResponseWriter, r *http.Request) error {
	return s.streamRepos(w, r, "/tunasync.json", "[", "]\n", func(rp store.Repo, sc *schedule) any {
		return s.tunasyncJob(rp, sc)
	})
}

// streamRepos answers a listing of every repo that others' tools read (/tunasync.json,
// /mirrorz.json): head, then item(repo) for each repo, comma-separated (nil: skipped),
// then tail. The store is read a page at a time and each item encoded as it is read, so
// a million repos never make one document in memory. With ?limit=N one page is
// answered, and a Link header (rel="next") names the next.
func (s *server) streamRepos(w http.ResponseWriter, r *http.Request, path, head, tail string, item func(store.Repo, *schedule) any) error {
	q, err := parseQuery(r)
	if err != nil {
		return err
	}
	cursor, limit := q.Get("cursor"), 0
	if v := q.Get("limit"); v != "" {
		if limit, err = strconv.Atoi(v); err != nil || limit < 1 || limit > maxListLimit {
			e := badRequest("invalid_parameter", "limit %q is not an integer from 1 to %d", truncate(v, 20), maxListLimit)
			e.Field = "limit"
			return e
		}
	}
	if len(cursor) > maxCursor {
		e := badRequest("invalid_parameter", "cursor is not one this server made")
		e.Field = "cursor"
		return e
	}
	ctx := r.Context()
	page := tunasyncPage
	if limit > 0 {
		page = limit
	}
	// The first page is read before anything is written, so a store error is still a
	// proper error response.
	repos, next, err := s.cfg.Store.ListRepos(ctx, cursor, page)
	if err != nil {
		return fmt.Errorf("list repos: %w", err)
	}
	sc, err := s.schedule(ctx, nil)
	if err != nil {
		return err
	}
	h := w.Header()
	h.Set("Content-Type", "application/json; charset=utf-8")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Cache-Control", "no-store")
	if limit > 0 && next != "" {
		v := url.Values{"limit": {strconv.Itoa(limit)}, "cursor": {next}}
		h.Set("Link", "<"+path+"?"+v.Encode()+`>; rel="next"`)
	}
	w.WriteHeader(http.StatusOK)
	rc := http.NewResponseController(w)
	enc := json.NewEncoder(w)
	if _, err := fmt.Fprint(w, head); err != nil {
		return nil // the client went away
	}
	sep := ""
	for {
		for _, rp := range repos {
			v := item(rp, sc)
			if v == nil {
				continue
			}
			if _, err := fmt.Fprint(w, sep); err != nil {
				return nil
			}
			sep = ","
			if err := enc.Encode(v); err != nil {
				return nil
			}
		}
		if limit > 0 || next == "" {
			break
		}
		// Each page gets a fresh write deadline: a client that keeps reading a long
		// feed is never cut, one that stops is.
		_ = rc.SetWriteDeadline(time.Now().Add(30 * time.Second))
		_ = rc.Flush()
		if repos, next, err = s.cfg.Store.ListRepos(ctx, next, page); err != nil {
			// Too late for an error status: end the document short of valid JSON, so
			// the client sees a failure rather than a shorter list.
			s.log.Warn(path+": list repos", "err", err)
			return nil
		}
	}
	_, _ = fmt.Fprint(w, tail)
	return nil
}
