package local

import (
	"bytes"
	"context"
	"fmt"
	"io"

	"golang.org/x/sys/unix"

	"github.com/distributor/distributor/storage"
)

// prepareVersion is prepareBytes.
func (b *Backend) prepareVersion(ctx context.Context, p string, data []byte) (preparedVersion, error) {
	// Prepared after the intent (a small catalog): named at once, and
	// renamed over the old version.
	s := b.newStage()
	if _, err := s.put(ctx, p, bytes.NewReader(data), int64(len(data)), storage.PutOptions{DeferSync: true}); err != nil {
		s.Close()
		return nil, err
	}
	return &prepared{b: b, s: s, p: p, data: data}, nil
}

// prepareVersionFrom is prepareStream.
func (b *Backend) prepareVersionFrom(ctx context.Context, p string, write func(io.Writer) error) (preparedVersion, error) {
	s := b.newStage()

	// Written unnamed (a publication prepares a large catalog before its
	// intent), swapped in, and the old version's removal started at once,
	// beside the commit's flush (Close waits). Written directly: no one
	// reads it before the next publication.
	s.displace, s.unnamed, s.displaced.min, s.direct = true, true, 1, true
	if err := piped(write, func(src io.Reader) error {
		_, err := s.put(ctx, p, src, -1, storage.PutOptions{DeferSync: true})
		return err
	}); err != nil {
		s.Close()
		return nil, fmt.Errorf("write %q in %s: %w", p, b.root, err)
	}
	return &prepared{b: b, s: s, p: p, streamed: true}, nil
}

// prepared is bytes written by prepareBytes; mark is syncCalls when
// they were placed (named).
type prepared struct {
	b    *Backend
	s    *stage
	p    string
	data []byte

	// streamed: written by prepareStream (data is nil).
	streamed bool
	placed   bool
	mark     uint64
}

// Place gives the prepared bytes a temp name beside the object (a leftover
// if the process dies before the commit), so that a Sync begun after it
// makes them durable with their name. CommitIfVersion places them itself
// (and then fsyncs them) when Place was not called.
func (pv *prepared) Place() (err error) {
	defer pv.b.classifyTo(&err)
	if pv.placed {
		return nil
	}
	pv.s.mu.Lock()
	st := pv.s.files[pv.p]
	pv.s.mu.Unlock()
	if st == nil {
		return fmt.Errorf("place %q in %s: nothing prepared", pv.p, pv.b.root)
	}
	if st.f != nil {
		if err := pv.s.nameTemp(st); err != nil {
			return fmt.Errorf("place %q in %s: %w", pv.p, pv.b.root, err)
		}
	}
	pv.placed, pv.mark = true, pv.b.syncCalls.Load()
	return nil
}

// CommitIfVersion swaps the prepared bytes in at p if p is at version want
// (ErrConflict otherwise), under the root's compare-and-swap lock, and
// flushes the folder: durable on return. Bytes that no successful Sync
// begun after Place covers are fsynced first, so the guarantee does not
// rest on the caller's order.
func (pv *prepared) CommitIfVersion(ctx context.Context, want storage.Version) (_ storage.Version, err error) {
	b := pv.b
	defer b.classifyTo(&err)
	r, unlock, err := b.lockAt(ctx, "write", pv.p, want)
	if err != nil {
		return "", err
	}
	defer unlock()
	flushed := pv.placed && b.syncedThrough.Load() > pv.mark
	if err := pv.Place(); err != nil {
		return "", err
	}
	if err := pv.s.makeDurable(pv.p, flushed); err != nil {
		return "", fmt.Errorf("write %q in %s: %w", pv.p, b.root, err)
	}
	if err := pv.s.commit(ctx, pv.p); err != nil {
		return "", fmt.Errorf("write %q in %s: %w", pv.p, b.root, err)
	}
	if pv.streamed || len(pv.data) >= statVersionMin {
		if v, ok := b.stamp(r, pv.p); ok {
			return v, nil
		}
	}
	if pv.streamed {
		v, err := b.versionByContent(r, pv.p)
		return v, err
	}
	return Version(pv.data), nil
}

// Close drops the bytes unless they were committed, and waits for the
// removal of the version the commit swapped out (displace_linux.go).
func (pv *prepared) Close() error { return pv.s.Close() }

// makeDurable marks the object staged at p durable, so that Commit flushes
// its folder; unless flushed (a Sync covered its bytes), its bytes are
// fsynced now.
func (s *stage) makeDurable(p string, flushed bool) error {
	s.mu.Lock()
	st := s.files[p]
	s.mu.Unlock()
	if st == nil {
		return fmt.Errorf("nothing staged at %q", p)
	}
	st.durable = true
	if flushed {
		return nil
	}
	var fd int
	var err error
	if st.f != nil {
		fd = int(st.f.fd.Load())
	} else {
		d, ferr := s.folder(st.dir, p)
		if ferr != nil {
			return ferr
		}
		if fd, err = unix.Openat(d, st.tmp, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0); err != nil {
			return fmt.Errorf("open %s: %w", st.tmp, err)
		}
		defer unix.Close(fd)
	}
	if err := unix.Fsync(fd); err != nil {
		return fmt.Errorf("sync: %w", err)
	}
	s.b.synced("file", st.dir)
	return nil
}
