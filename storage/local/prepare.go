package local

import (
	"context"
	"io"

	"github.com/distributor/distributor/storage"
)

// prepareBytes writes data as the future object p under a temp name,
// without a flush (PrepareCatalog). A Sync that begins after it
// (or after Place, a no-op here) makes the bytes durable; CommitIfVersion
// then only renames them into place and flushes the folder. A publication
// prepares its catalog before the syncfs that makes its outputs durable:
// one flush (the catalog file's fsync) fewer per publication, the same
// guarantee. The portable implementation writes and flushes the bytes
// under their temp name at once; CommitIfVersion renames them into place.
func (b *Backend) prepareBytes(ctx context.Context, p string, data []byte) (_ preparedVersion, err error) {
	defer b.classifyTo(&err)
	return b.sys.prepare(ctx, p, data)
}

// prepareStream is prepareBytes with the bytes that write writes,
// never held whole (a catalog of a million records), into an unnamed file
// where the file system has them (else under a temp name): a process that
// dies before Place leaves nothing. Place gives the bytes a temp name; a
// Sync that begins after it makes them durable with that name, and
// CommitIfVersion swaps them in. The bytes go through a pipe into the
// file, whose writeback starts every writebackChunk as it is written, not
// every MiB as for a file flushed at once: the bytes of a large catalog
// would otherwise queue on the disk ahead of the intent's flush, which the
// publication waits for. The portable implementation writes them under a
// temp name, as prepareBytes does.
func (b *Backend) prepareStream(ctx context.Context, p string, write func(io.Writer) error) (_ preparedVersion, err error) {
	defer b.classifyTo(&err)
	return b.sys.prepareFrom(ctx, p, write)
}

// preparedVersion is an object's next version written ahead of its
// compare-and-swap (prepareBytes, prepareStream).
type preparedVersion interface {
	// Place names the bytes (a temp name), so that a Sync begun after it
	// makes them durable with their name.
	Place() error

	// CommitIfVersion is WriteIfVersion of the prepared bytes: durable on
	// return, whether or not a Sync ran since the prepare.
	CommitIfVersion(ctx context.Context, want storage.Version) (storage.Version, error)

	// Close drops the bytes if they were not committed.
	Close() error
}
