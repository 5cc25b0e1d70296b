package local

import (
	"path"
	"slices"
	"sync"
)

// dirtySet is what the next Sync must flush: the whole root (a write or
// stage with DeferSync that returned), or only a few files and folders
// (an intent emptied or a fingerprint shard rewritten in place, a lock
// object written or removed without a flush), each flushed alone, which
// costs far less than a flush of the root's file system; or nothing.
//
// Changes are numbered as they are recorded (after they are made), and a
// change is forgotten only once a flush that began after it ends: a Sync
// that finds a change another Sync is flushing flushes it too rather than
// return before it is durable.
type dirtySet struct {
	mu      sync.Mutex
	changes uint64            // changes recorded so far
	all     uint64            // the last change only a flush of the root covers
	flushed uint64            // changes before which a flush of the root ended
	files   map[string]uint64 // files whose bytes or size changed in place: the last change
	dirs    map[string]uint64 // folders whose entries changed: the last change
}

// dirty is what one Sync found to flush.
type dirty struct {
	through     uint64 // the changes it covers
	all         bool   // a flush of the root
	files, dirs []string
}

// mark records a change only a flush of the root makes durable.
func (d *dirtySet) mark() {
	d.mu.Lock()
	d.changes++
	d.all = d.changes
	d.mu.Unlock()
}

// file records that the file p was changed in place.
func (d *dirtySet) file(p string) { d.add(p, false) }

// entry records that the file p was written under a new name or removed:
// its bytes, and its folder's entries.
func (d *dirtySet) entry(p string) { d.add(p, true) }

func (d *dirtySet) add(p string, entry bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.files == nil {
		d.files, d.dirs = map[string]uint64{}, map[string]uint64{}
	}
	d.changes++
	d.files[p] = d.changes
	if entry {
		d.dirs[path.Dir(p)] = d.changes
	}
}

// take returns what is dirty now, files and folders in path order.
func (d *dirtySet) take() dirty {
	d.mu.Lock()
	defer d.mu.Unlock()
	t := dirty{through: d.changes, all: d.all > d.flushed}
	for p := range d.files {
		t.files = append(t.files, p)
	}
	for dir := range d.dirs {
		t.dirs = append(t.dirs, dir)
	}
	slices.Sort(t.files)
	slices.Sort(t.dirs)
	return t
}

// done forgets what a flush that ended covered: the changes through t,
// of the root's file system (all) or of t's files and folders.
func (d *dirtySet) done(t dirty, all bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if all {
		d.flushed = max(d.flushed, t.through)
		t.files, t.dirs = nil, nil
		for p, n := range d.files {
			if n <= t.through {
				delete(d.files, p)
			}
		}
		for dir, n := range d.dirs {
			if n <= t.through {
				delete(d.dirs, dir)
			}
		}
		return
	}
	for _, p := range t.files {
		if d.files[p] <= t.through {
			delete(d.files, p)
		}
	}
	for _, dir := range t.dirs {
		if d.dirs[dir] <= t.through {
			delete(d.dirs, dir)
		}
	}
}
