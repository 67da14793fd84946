package worker

// ScoredPolls is how many polls the worker's hazard scores hold (priority.Scores).
func (w *Worker) ScoredPolls() float64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.scores.Polls
}
