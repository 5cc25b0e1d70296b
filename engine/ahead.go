package engine

import (
	"context"
	"fmt"

	"github.com/distributor/distributor/catalog"
	"github.com/distributor/distributor/lease"
	"github.com/distributor/distributor/storage"
)

// A root whose catalog commit is one request with no barrier before it
// (no storage.VersionPreparer: S3) has the work around that request
// overlapped with round trips: the next catalog is encoded, and its write
// prepared where the root can (storage.WritePreparer: S3 takes its
// sha256), while the outputs are written (encodeAhead), and the
// fingerprint shards are written while the catalog is committed
// (saveBeside). Neither changes what is written or in which order outputs
// and catalog become visible: the catalog's bytes are sent only after
// every write (and its deletes) as before, and the shards are facts about
// the versions written, which hold whether or not the commit wins (see
// Fingerprints in the package doc).

// encodedAhead is the next catalog being encoded beside the writes.
type encodedAhead struct {
	done chan struct{}
	data []byte
	err  error
	// write is the root's own preparation of the write (WritePreparer).
	write storage.PreparedVersion
}

// encodeAhead starts encoding next for a root that commits it whole in
// one request; nil for any other root (local roots prepare it themselves,
// streamed catalogs are encoded as they are sent).
func (e *Engine) encodeAhead(root storage.Backend, next *catalog.Catalog) *encodedAhead {
	if !e.commitsInOneRequest(root, next) {
		return nil
	}
	a := &encodedAhead{done: make(chan struct{})}
	go func() {
		defer close(a.done)
		a.data, a.err = catalog.Marshal(next)
		if wp, ok := root.(storage.WritePreparer); ok && a.err == nil {
			a.write = wp.PrepareWrite(catalog.FileName, a.data)
		}
	}()
	return a
}

// commitsInOneRequest: the root takes next's bytes whole with
// WriteIfVersion (commitPrepared's default).
func (e *Engine) commitsInOneRequest(root storage.Backend, next *catalog.Catalog) bool {
	if _, ok := root.(storage.VersionPreparer); ok || next == nil {
		return false
	}
	_, stream := root.(storage.VersionStreamer)
	return !stream || !e.streams(len(next.Outputs))
}

// wait returns the encoding's end (a nil receiver waits for nothing).
func (a *encodedAhead) wait() {
	if a != nil {
		<-a.done
	}
}

// prepared waits for the encoding and returns it as the PreparedVersion
// commitPrepared takes.
func (a *encodedAhead) prepared(root storage.Backend) (storage.PreparedVersion, error) {
	a.wait()
	if a.err != nil {
		return nil, fmt.Errorf("engine: refusing to write an invalid catalog: %w", a.err)
	}
	if a.write != nil {
		return a.write, nil
	}
	return encodedVersion{root: root, data: a.data}, nil
}

// encodedVersion is a catalog encoded ahead, committed with WriteIfVersion.
type encodedVersion struct {
	root storage.Backend
	data []byte
}

func (v encodedVersion) CommitIfVersion(ctx context.Context, want storage.Version) (storage.Version, error) {
	return v.root.WriteIfVersion(ctx, catalog.FileName, v.data, want)
}

func (v encodedVersion) Close() error { return nil }

// saveBeside starts saveFingerprints for cat beside the commit of a root
// that commits in one request, when the index keeps its layout (a
// relayout retires shards, which waits for the commit); the returned
// function waits for it. Nil when the shards are to be saved after the
// commit, as on other roots.
func (e *Engine) saveBeside(ctx context.Context, root storage.Backend, l lease.Lease, f *fingerprints, cat *catalog.Catalog) func() {
	if !e.commitsInOneRequest(root, cat) || len(f.dirty) == 0 || FingerprintShards(len(cat.Outputs)) != f.shards {
		return nil
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		e.saveFingerprints(ctx, root, l, f, cat)
	}()
	return func() { <-done }
}
