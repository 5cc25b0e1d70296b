package service

// Queued reports how many publications of r hold or wait for the turn of
// the root key (tests wait for a queue to form).
func (r *Service) Queued(key string) int {
	r.turns.mu.Lock()
	defer r.turns.mu.Unlock()
	if tu := r.turns.q[key]; tu != nil {
		return len(tu.line)
	}
	return 0
}

// Waiting reports how many places in key's line belong to publications
// that hold or wait for the turn (not to events still on their way).
func (r *Service) Waiting(key string) int {
	r.turns.mu.Lock()
	defer r.turns.mu.Unlock()
	n := 0
	if tu := r.turns.q[key]; tu != nil {
		for _, s := range tu.line {
			if s.arrived {
				n++
			}
		}
	}
	return n
}
