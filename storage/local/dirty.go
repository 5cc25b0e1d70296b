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
// costs far less than a flush of the root's file system; or nothing. A
// change is recorded after it is made, so a Sync that began before the
// change returned may miss it and leaves it for the next one.
type dirtySet struct {
	mu    sync.Mutex
	all   bool
	files map[string]bool // files whose bytes or size changed in place
	dirs  map[string]bool // folders whose entries changed
}

// mark records a change only a flush of the root makes durable.
func (d *dirtySet) mark() {
	d.mu.Lock()
	d.all = true
	d.mu.Unlock()
}

// file records that the file p was changed in place.
func (d *dirtySet) file(p string) { d.add([]string{p}, nil) }

// entry records that the file p was written under a new name or removed:
// its bytes, and its folder's entries.
func (d *dirtySet) entry(p string) { d.add([]string{p}, []string{path.Dir(p)}) }

func (d *dirtySet) add(files, dirs []string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.files == nil {
		d.files, d.dirs = map[string]bool{}, map[string]bool{}
	}
	for _, p := range files {
		d.files[p] = true
	}
	for _, dir := range dirs {
		d.dirs[dir] = true
	}
}

// take returns what is dirty, in path order, and forgets it.
func (d *dirtySet) take() (files, dirs []string, all bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	for p := range d.files {
		files = append(files, p)
	}
	for dir := range d.dirs {
		dirs = append(dirs, dir)
	}
	slices.Sort(files)
	slices.Sort(dirs)
	all, d.all, d.files, d.dirs = d.all, false, nil, nil
	return files, dirs, all
}

// restore records again what a failed Sync took.
func (d *dirtySet) restore(files, dirs []string, all bool) {
	d.add(files, dirs)
	if all {
		d.mark()
	}
}
