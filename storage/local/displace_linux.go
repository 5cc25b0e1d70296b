package local

import (
	"cmp"
	"errors"
	"io/fs"
	"sync"

	"golang.org/x/sys/unix"
)

// Freeing a replaced file's blocks is what a rename over it costs on a
// file system mounted with discard (ext4 without a journal issues the
// discard inside the rename, longer the larger the file), and a rename
// holds its folder's lock meanwhile.
// A replacing stage therefore swaps the new file and the old one
// (renameat2 RENAME_EXCHANGE: as atomic for readers as a rename; the old
// file now has the temp name) and removes the old one in the background;
// its Close waits for the removals. A crash in between leaves the old
// bytes under a temp name: never listed, removed like any other leftover
// (its modification time is the replaced file's).

// displaceWorkers is how many removals of displaced files run at once:
// their unlink frees blocks outside the folder's lock, so they overlap.
// They start only once displaceAsyncMin files wait (min, when set): fewer
// are removed by wait itself, since goroutines cost a small publication
// more scheduling (~18 system calls) than its one or two removals.
const (
	displaceWorkers  = 2
	displaceAsyncMin = 8
)

// displacer removes the files a stage's replacements displaced.
type displacer struct {
	// min overrides displaceAsyncMin when positive.
	min  int
	mu   sync.Mutex
	held []displaced    // waiting for workers or for wait
	jobs chan displaced // nil until the workers start
	wg   sync.WaitGroup
}

// displaced is a displaced file: name in the folder d.
type displaced struct {
	d    int
	name string
}

func (r *displacer) remove(d int, name string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.jobs != nil {
		r.jobs <- displaced{d, name}
		return
	}
	r.held = append(r.held, displaced{d, name})
	if at := cmp.Or(r.min, displaceAsyncMin); len(r.held) < at {
		return
	}
	r.jobs = make(chan displaced, 64)
	for range displaceWorkers {
		r.wg.Add(1)
		go func(jobs <-chan displaced) {
			defer r.wg.Done()
			for j := range jobs {
				unlinkDisplaced(j)
			}
		}(r.jobs)
	}
	for _, j := range r.held {
		r.jobs <- j
	}
	r.held = nil
}

// wait removes what no worker took and waits for the workers; the
// displacer can be used again.
func (r *displacer) wait() {
	r.mu.Lock()
	held := r.held
	r.held = nil
	if r.jobs != nil {
		close(r.jobs)
		r.jobs = nil
	}
	r.mu.Unlock()
	for _, j := range held {
		unlinkDisplaced(j)
	}
	r.wg.Wait()
}

func unlinkDisplaced(j displaced) {
	// A failure leaves a leftover temp name, never listed and removed by
	// the leftover cleaning.
	_ = unix.Unlinkat(j.d, j.name, 0)
}

// swaps reports whether the stage's replacements swap the old file out:
// only in a stage of displaceAsyncMin files or more (the displacer's min,
// when set), decided at its first replacement. A small one renames over
// the old file, as it costs no more there: the removals would run at
// Close, one by one, and each swap costs a stat more.
func (s *stage) swaps() bool {
	if !s.displace {
		return false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.swap == 0 {
		s.swap = -1

		// The file being committed has left s.files already.
		if len(s.files)+1 >= cmp.Or(s.displaced.min, displaceAsyncMin) {
			s.swap = 1
		}
	}
	return s.swap > 0
}

// ClosesLate reports whether Close waits for removals that the commits
// began (engine: such a stage is closed when the publication ends).
func (s *stage) ClosesLate() bool { return s.displace }

// replace renames tmp over name in the folder d. With displace set (the
// stage removes what its replacements displace), the old file is swapped
// out and removed in the background instead of freed inside the rename.
func (s *stage) replace(d int, tmp, name string) error {
	if s.swaps() && !s.b.noExchange.Load() {
		err := unix.Renameat2(d, tmp, d, name, unix.RENAME_EXCHANGE)
		switch {
		case err == nil:
			var st unix.Stat_t
			if unix.Fstatat(d, tmp, &st, unix.AT_SYMLINK_NOFOLLOW) == nil && st.Mode&unix.S_IFMT == unix.S_IFDIR {
				// A folder took name's place since it was checked: a
				// rename would have refused; put it back.
				if uerr := unix.Renameat2(d, tmp, d, name, unix.RENAME_EXCHANGE); uerr != nil {
					return &fs.PathError{Op: "put back the folder swapped out of", Path: name, Err: uerr}
				}
				return unix.EISDIR
			}
			s.displaced.remove(d, tmp)
			return nil
		case errors.Is(err, unix.ENOENT):
			// Nothing at name (removed since it was checked): a plain
			// rename names it.
		case errors.Is(err, unix.EINVAL) || errors.Is(err, unix.EOPNOTSUPP) || errors.Is(err, unix.ENOSYS):
			s.b.noExchange.Store(true) // this file system cannot swap: renames from now on
		default:
			return err
		}
	}
	return unix.Renameat(d, tmp, d, name)
}
