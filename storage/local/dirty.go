package local

import (
	"slices"
	"sync"
)

// dirtySet is what the next Sync must flush: the whole root (a change
// made with DeferSync that returned), or only files emptied in place (an
// intent's removal), each flushed alone, which costs far less than a
// flush of the root's filesystem. A change marks it after it is made, so
// a Sync that began before the change returned may miss it and leaves the
// mark for the next one.
type dirtySet struct {
	mu      sync.Mutex
	all     bool
	emptied map[string]bool
}

// mark records a change only a flush of the root makes durable.
func (d *dirtySet) mark() {
	d.mu.Lock()
	d.all = true
	d.mu.Unlock()
}

// empty records that the file p was emptied in place.
func (d *dirtySet) empty(p string) {
	d.mu.Lock()
	if d.emptied == nil {
		d.emptied = map[string]bool{}
	}
	d.emptied[p] = true
	d.mu.Unlock()
}

// take returns what is dirty, in path order, and forgets it.
func (d *dirtySet) take() (emptied []string, all bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	for p := range d.emptied {
		emptied = append(emptied, p)
	}
	slices.Sort(emptied)
	all, d.all, d.emptied = d.all, false, nil
	return emptied, all
}

// restore records again what a failed Sync took.
func (d *dirtySet) restore(emptied []string, all bool) {
	for _, p := range emptied {
		d.empty(p)
	}
	if all {
		d.mark()
	}
}
