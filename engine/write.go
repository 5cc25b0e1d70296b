package engine

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"mime"
	"path"
	"sort"
	"sync"
	"sync/atomic"

	"golang.org/x/sync/errgroup"

	"github.com/distributor/distributor/lease"
	"github.com/distributor/distributor/planner"
	"github.com/distributor/distributor/progress"
	"github.com/distributor/distributor/storage"
)

// write writes every planned output (naming the staged ones).
func (r *publication) write(ctx context.Context) error {
	startItems(ctx, "writing", r.writes, nil)

	// The backend writes the next catalog beside the outputs as it sees
	// fit (see storage.Backend.PrepareCatalog), and the lease is confirmed
	// for its commit beside them too: after the plan read the catalog the
	// commit swaps against, which is all the fence needs (see confirming).
	r.cat = r.root.PrepareCatalog(ctx, r.pl.st.nextDocument(ctx, r.pl.Plan.Next), len(r.writes))
	r.confirmed = confirming(ctx, r.l)
	written, err := r.writeGroups(ctx)
	r.res.Written = append(r.res.Written, written...)
	if err != nil {
		r.closeStage()

		// Deletes are skipped; roll the landed writes forward so the catalog
		// describes them (and a retry does not collide with them).
		// The intent stays: a retry of this event reports these writes.
		return r.rollForward(ctx, "write", err)
	}
	return nil
}

// writeAll writes the plan's outputs, each only if its path still holds
// what the plan saw (nothing, or the listed version), and records the new
// versions in fps. With a stage, the outputs are staged already: writing
// one is naming it.
func (e *Engine) writeAll(ctx context.Context, root storage.Backend, l lease.Lease, pub Publication, writes []planner.Item, content map[string][]byte, stored map[string]planner.Stored, fps *fingerprints, stg *staged) ([]planner.Item, error) {
	var mu sync.Mutex
	done := make([]planner.Item, 0, len(writes))
	err := e.forEach(ctx, len(writes), func(ctx context.Context, i int) error {
		it := writes[i]
		if err := l.Err(); err != nil {
			return err
		}
		var oi storage.ObjectInfo
		var err error
		if stg != nil {
			oi, err = stg.commit(ctx, root, it)
		} else {
			s, exists := stored[it.Path]
			oi, err = e.writeOne(ctx, root, pub, it, content[it.Path], s, exists)
		}
		if err != nil {
			return err
		}
		progress.Add(ctx, 1, it.Desired.Size)
		mu.Lock()
		done = append(done, it)
		if oi.Fingerprint != "" {
			fps.set(it.Path, known{fingerprint: oi.Fingerprint, sha256: it.Record.SHA256})
		}
		mu.Unlock()
		return nil
	})
	sort.Slice(done, func(i, j int) bool { return done[i].Path < done[j].Path })
	return done, err
}

// forEach runs fn for 0..n-1 on at most e.workers() goroutines that each
// take the next index until none is left or one fails (which cancels
// ctx for the others). Long-lived workers, not one goroutine per object:
// each would grow its stack again through the deep write path.
func (e *Engine) forEach(ctx context.Context, n int, fn func(ctx context.Context, i int) error) error {
	if e.workersFor(n) == 1 {
		// One worker: the caller's goroutine, whose stack has grown already.
		for i := range n {
			if err := ctx.Err(); err != nil {
				return nil // as the workers below: a cancelled run stops taking work
			}
			if err := fn(ctx, i); err != nil {
				return err
			}
		}
		return nil
	}
	var next atomic.Int64
	g, gctx := errgroup.WithContext(ctx)
	for range e.workersFor(n) {
		g.Go(func() error {
			for {
				i := int(next.Add(1) - 1)
				if i >= n || gctx.Err() != nil {
					return nil
				}
				if err := fn(gctx, i); err != nil {
					return err
				}
			}
		})
	}
	return g.Wait()
}

// writeOne writes one output on the condition that its path still holds
// what the plan saw: nothing (a new path), or the stored version s. A
// holder that lost its lease mid-write then cannot land on a newer
// holder's work (the fingerprint index covers what conditions cannot: see
// Fingerprints in the package doc).
func (e *Engine) writeOne(ctx context.Context, root storage.Backend, pub Publication, it planner.Item, data []byte, s planner.Stored, exists bool) (storage.ObjectInfo, error) {
	r, done, err := source(ctx, pub, it, data)
	if err != nil {
		return storage.ObjectInfo{}, err
	}
	defer done()
	opts := putOptions(it, s, exists)
	opts.SourceVerified = data == nil // bundle.Open checks the digest itself
	oi, err := root.Put(ctx, it.Path, r, it.Desired.Size, opts)
	if err != nil {
		return oi, writeError(root, it, err)
	}
	return oi, nil
}

// source returns the bytes of one output: its generated content, or its
// bundle file (verified while read).
func source(ctx context.Context, pub Publication, it planner.Item, data []byte) (io.Reader, func(), error) {
	if data != nil {
		return bytes.NewReader(data), func() {}, nil
	}
	rc, err := pub.Bundle.Open(ctx, it.Desired.From)
	if err != nil {
		return nil, nil, err
	}
	return rc, func() { rc.Close() }, nil
}

// putOptions are one output's write options: deferred sync (one barrier
// for the publication), and the condition that its path still holds what
// the plan saw.
func putOptions(it planner.Item, s planner.Stored, exists bool) storage.PutOptions {
	return storage.PutOptions{SHA256: it.Desired.SHA256, ContentType: mime.TypeByExtension(path.Ext(it.Path)), DeferSync: true,
		IfAbsent: !exists, IfMatch: s.Fingerprint}
}

func writeError(root storage.Backend, it planner.Item, err error) error {
	if errors.Is(err, storage.ErrConflict) {
		return fmt.Errorf("write %s in %s: %w: it changed since the plan (another writer); the retry re-plans", it.Path, root, err)
	}
	return fmt.Errorf("write %s in %s: %w", it.Path, root, err)
}

func (e *Engine) workers() int {
	if e.Workers <= 0 {
		return 4
	}
	return e.Workers
}

// workersFor bounds the workers for n objects: no more than there is work.
func (e *Engine) workersFor(n int) int {
	return max(1, min(e.workers(), n))
}
