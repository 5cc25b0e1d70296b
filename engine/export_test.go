package engine

// Queued reports how many publications of r hold or wait for the turn of
// the root key (tests wait for a queue to form).
func (r *Runner) Queued(key string) int {
	r.turns.mu.Lock()
	defer r.turns.mu.Unlock()
	if tu := r.turns.q[key]; tu != nil {
		return len(tu.line)
	}
	return 0
}
