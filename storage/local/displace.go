package local

import (
	"errors"
	"io/fs"
	"sync"

	"golang.org/x/sys/unix"
)

// Freeing a replaced file's blocks is what a rename over it costs on a
// file system mounted with discard (ext4 without a journal issues the
// discard inside the rename: ~0.3 ms for 4 KiB on the test machine, ~5 ms
// for a 5 MB catalog), and a rename holds its folder's lock meanwhile.
// A replacing stage therefore swaps the new file and the old one
// (renameat2 RENAME_EXCHANGE: as atomic for readers as a rename; the old
// file now has the temp name) and removes the old one in the background;
// its Close waits for the removals. A crash in between leaves the old
// bytes under a temp name: never listed, removed like any other leftover
// (its modification time is the replaced file's).

// displaceWorkers is how many removals of displaced files run at once:
// their unlink frees blocks outside the folder's lock, so they overlap.
const displaceWorkers = 2

// displacer removes the files a stage's replacements displaced.
type displacer struct {
	mu   sync.Mutex
	jobs chan displaced // nil until the first removal
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
	if r.jobs == nil {
		r.jobs = make(chan displaced, 64)
		for range displaceWorkers {
			r.wg.Add(1)
			go func(jobs <-chan displaced) {
				defer r.wg.Done()
				for j := range jobs {
					// A failure leaves a leftover temp name, never listed
					// and removed by the leftover cleaning.
					_ = unix.Unlinkat(j.d, j.name, 0)
				}
			}(r.jobs)
		}
	}
	r.jobs <- displaced{d, name}
}

// wait waits for every removal begun; the displacer can be used again.
func (r *displacer) wait() {
	r.mu.Lock()
	if r.jobs != nil {
		close(r.jobs)
		r.jobs = nil
	}
	r.mu.Unlock()
	r.wg.Wait()
}

// ClosesLate reports whether Close waits for removals that the commits
// began (engine: such a stage is closed when the publication ends).
func (s *stage) ClosesLate() bool { return s.displace }

// replace renames tmp over name in the folder d. With displace set (the
// stage removes what its replacements displace), the old file is swapped
// out and removed in the background instead of freed inside the rename.
func (s *stage) replace(d int, tmp, name string) error {
	if s.displace && !s.b.noExchange.Load() {
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
			// Nothing at name (removed since it was checked): a rename
			// names it as before.
		case errors.Is(err, unix.EINVAL) || errors.Is(err, unix.EOPNOTSUPP) || errors.Is(err, unix.ENOSYS):
			s.b.noExchange.Store(true) // this file system cannot swap: renames from now on
		default:
			return err
		}
	}
	return unix.Renameat(d, tmp, d, name)
}
