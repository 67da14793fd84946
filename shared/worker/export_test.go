package worker

import "github.com/mirrorfleet/mirrorfleet/shared/store"

// held is the entry of a repo a worker holds, queued, at url.
func held(id, url string) *repoEntry {
	return &repoEntry{RepoState: RepoState{Phase: Queued, Rec: store.Repo{ID: id, URL: url}}, host: hostOf(url)}
}

// ScoredPolls is how many polls the worker's hazard scores hold (priority.Scores).
func (w *Worker) ScoredPolls() float64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.scores.Polls
}
