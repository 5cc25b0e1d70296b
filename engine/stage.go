package engine

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/distributor/distributor/bundle"
	"github.com/distributor/distributor/planner"
	"github.com/distributor/distributor/progress"
	"github.com/distributor/distributor/storage"
)

// prepare checks the bundle files this plan copies, stages the writes when
// the backend can, and loads the fingerprint shards the writes rewrite.
func (r *publication) prepare(ctx context.Context) error {
	r.content = make(map[string][]byte)
	for _, o := range r.pub.Outputs {
		if o.Content != nil {
			r.content[o.Path] = o.Content
		}
	}
	var copies []string
	for _, it := range r.writes {
		if _, ok := r.content[it.Path]; !ok {
			copies = append(copies, it.Desired.From)
		}
	}

	// Every output is written invisibly first, the bundle's bytes hashed
	// as they pass, and named only once all are complete: each bundle
	// byte is read once. Not when deletes must first make room for the
	// writes' folders.
	staging := len(r.displaced) == 0 && len(r.writes) > 0
	if err := r.checkCopies(ctx, copies, staging); err != nil {
		return err
	}
	if staging {
		r.stg = &staged{Stage: r.root.Stage(ctx)}
		if err := r.e.stageAll(ctx, r.root, r.stg, r.pub, r.writes, r.content, r.pl.stored); err != nil {
			// The sizes were not checked up front (see checkCopies): a
			// missing or resized bundle file is reported as that check
			// reports it, all of them at once, before any other failure.
			if len(copies) > 0 {
				if serr := r.pub.Bundle.CheckSizes(ctx, copies); serr != nil {
					return serr
				}
			}
			return err
		}
	}

	// The index shards of the paths about to be written are rewritten
	// afterwards: their other entries are kept (loadForRewrite).
	writePaths := make([]string, len(r.writes))
	for i, it := range r.writes {
		writePaths[i] = it.Path
	}
	whole := r.pl.st.paths == nil
	if err := r.e.loadForRewrite(ctx, r.root, r.pl.fps, writePaths, whole); err != nil {
		return fmt.Errorf("read fingerprints in %s: %w", r.root, err)
	}
	return nil
}

// checkCopies fails the publication before any byte is visible ("never a
// partial write") when a bundle file it copies is missing or is not the
// manifest's: the digest of every file this plan copies — only those, so
// the cost still follows the change — while staging, or in a pass of its
// own after the sizes (cheap). Staging names nothing until every file is
// verified, so it checks the sizes only when it fails (prepare): up front
// they cost three system calls per file for nothing.
func (r *publication) checkCopies(ctx context.Context, copies []string, staging bool) error {
	if len(copies) == 0 {
		return nil
	}
	if r.pub.Bundle == nil {
		return errors.New("engine: publication copies files but has no bundle")
	}
	if !staging {
		if err := r.pub.Bundle.CheckSizes(ctx, copies); err != nil {
			return err
		}
	}
	startItems(ctx, "checking bundle", r.writes, func(it planner.Item) bool { _, ok := r.content[it.Path]; return !ok })
	if staging {
		return nil
	}
	return r.e.verifyCopies(ctx, r.pub.Bundle, copies)
}

// staged is a stage of a publication's writes.
type staged struct {
	storage.Stage
}

// stageAll stages every write. A bundle file whose bytes are not the
// manifest's fails its Put (bundle.Open verifies while streaming), before
// anything is visible. A backend that keeps nothing of a file's bytes
// opens it again when it names it (storage.Source).
func (e *Engine) stageAll(ctx context.Context, root storage.Backend, stg *staged, pub Publication, writes []planner.Item, content map[string][]byte, stored map[string]planner.Stored) error {
	return e.forEach(ctx, len(writes), func(ctx context.Context, i int) error {
		it := writes[i]
		var first *sourceReader // the bytes Put checks: the bundle's own error is its
		open := func(ctx context.Context) (io.ReadCloser, error) {
			r, done, err := source(ctx, pub, it, content[it.Path])
			if err != nil {
				return nil, err
			}
			src := &sourceReader{r: r, done: done}
			if first == nil {
				first = src
			}
			return src, nil
		}
		s, exists := stored[it.Path]
		opts := putOptions(it, s, exists)
		opts.SourceVerified = content[it.Path] == nil // bundle.Open checks the digest itself
		_, err := stg.Put(ctx, it.Path, open, it.Desired.Size, opts)
		if first != nil && first.err != nil && !errors.Is(first.err, io.EOF) && errors.Is(err, first.err) {
			return first.err // the bundle's own error (a damaged file), as the verification pass reports it
		}
		if err != nil {
			return writeError(root, it, err)
		}
		if _, generated := content[it.Path]; !generated {
			progress.Add(ctx, 1, it.Desired.Size) // the "checking bundle" stage: this copy is verified
		}
		return nil
	})
}

// sourceReader remembers the error its source gave.
type sourceReader struct {
	r    io.Reader
	done func()
	err  error
}

func (s *sourceReader) Read(p []byte) (int, error) {
	n, err := s.r.Read(p)
	if err != nil {
		s.err = err
	}
	return n, err
}

func (s *sourceReader) Close() error {
	s.done()
	return nil
}

// commit names one staged output.
func (stg *staged) commit(ctx context.Context, root storage.Backend, it planner.Item) (storage.ObjectInfo, error) {
	oi, err := stg.Commit(ctx, it.Path)
	if err != nil {
		return oi, writeError(root, it, err)
	}
	return oi, nil
}

// verifyCopies reads and hashes the bundle files to be copied.
func (e *Engine) verifyCopies(ctx context.Context, b *bundle.Bundle, paths []string) error {
	return e.forEach(ctx, len(paths), func(ctx context.Context, i int) error {
		r, err := b.Open(ctx, paths[i])
		if err != nil {
			return err
		}
		defer r.Close()
		n, err := io.Copy(io.Discard, r)
		progress.Add(ctx, 1, n)
		return err
	})
}

func (r *publication) closeStage() {
	if r.stg != nil {
		r.stg.Close()
	}
}
