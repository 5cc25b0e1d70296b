package local

import (
	"context"
	"io"

	"github.com/distributor/distributor/storage"
)

// Stage begins a set of writes that stay invisible until committed
// (storage.Backend.Stage). Conditions are checked at Commit.
//
// On Linux (stage_linux.go), new paths (IfAbsent) are written to unnamed
// files (O_TMPFILE) that are named by linkat(2) at Commit; replacements,
// and new paths past the stage's share of open files, to temp names that
// List skips, renamed (or linked) at Commit. Every folder is opened once
// per stage, component by component with O_NOFOLLOW from the root, and
// files are created relative to its handle: no path walk per file, and
// never through a symlink. A folder replaced by a link while the stage is
// open is not noticed; the handle stays on the folder that was opened (as
// a root moved away stays on its handle: see CheckRoot).
//
// The portable implementation (portable.go) writes every staged object to
// a temp name beside its path, through the root, and links (IfAbsent) or
// renames it into place at Commit.
func (b *Backend) Stage(context.Context) storage.Stage {
	return b.sys.newStage(true)
}

// stager is a stage as the backend's own writes use it too: put is Put
// with its errors unclassified.
type stager interface {
	storage.Stage
	put(ctx context.Context, p string, src io.Reader, size int64, opts storage.PutOptions) (storage.ObjectInfo, error)

	// commit is Commit without the info.
	commit(ctx context.Context, p string) error
}

// putSource opens src and stages its bytes in s (Stage.Put): a local
// stage keeps every object it is given, so src is read once.
func (b *Backend) putSource(ctx context.Context, s stager, p string, src storage.Source, size int64, opts storage.PutOptions) (storage.ObjectInfo, error) {
	r, err := src(ctx)
	if err != nil {
		return storage.ObjectInfo{}, err
	}
	defer r.Close()
	oi, err := s.put(ctx, p, r, size, opts)
	if err == nil && opts.DeferSync {
		b.dirty.mark()
	}
	return oi, err
}

// Copy buffers: objects up to smallBuf bytes (most of a tree of small
// files) copy through a pooled buffer of that size, others through a
// pooled bigBuf one. A fresh buffer per file cost more (allocation,
// clearing and the GC it drives) than the write itself for small files.
const (
	smallBuf = 32 << 10
	bigBuf   = 256 << 10
)
