package storage

import (
	"context"
	"errors"
	"io"
	"time"
)

var (
	// ErrNotExist: the object is not there.
	ErrNotExist = errors.New("object does not exist")
	// ErrConflict: a conditional write lost (the object changed since it was read).
	ErrConflict = errors.New("object changed since it was read")
	// ErrUnavailable wraps transient backend failures (network, throttling):
	// the operation may succeed if tried again later.
	ErrUnavailable = errors.New("storage unavailable")
	// ErrDenied: the destination refuses the operation (no permission, a
	// read-only file system, S3 access denied). Retrying does not help
	// until an operator fixes the permissions or remounts it read-write.
	ErrDenied = errors.New("access denied")
	// ErrRootMissing: the root's path names no folder any more (moved or
	// deleted). Retrying does not help until an operator recreates it.
	ErrRootMissing = errors.New("destination root does not exist")
	// ErrRootChanged: the root's path now names another folder than the
	// one the backend holds (moved away and replaced, or a re-pointed
	// symlink). Opening the root again reaches the new folder.
	ErrRootChanged = errors.New("the root path now names another folder")
	// ErrNotStaged: Stage.Put read and checked the bytes (to their end) but
	// keeps nothing, e.g. an object too large to stage or a stage whose
	// memory for small objects is used up. The caller writes that path with
	// Backend.Put instead, after the staged ones are verified.
	ErrNotStaged = errors.New("object not staged")
)

// ObjectInfo describes one stored object.
type ObjectInfo struct {
	Path    string
	Size    int64
	ModTime time.Time
	// SHA256 is the digest recorded with the object by distributor
	// ("sha256:<hex>"), when the backend keeps metadata; empty otherwise.
	SHA256 string
	// Fingerprint identifies this stored version of the object cheaply (S3:
	// the ETag; local: inode, size and modification time). Replacing the
	// object changes it; it says nothing about the content by itself.
	// Empty when the backend cannot tell.
	Fingerprint string
}

// Version identifies one stored version of an object for compare-and-swap.
// The zero Version means "no object".
type Version string

// PutOptions tune a write.
type PutOptions struct {
	// SHA256 of the bytes, stored as object metadata where supported.
	SHA256 string
	// ContentType, when known.
	ContentType string
	// DeferSync lets Put return before the bytes are durable; the caller
	// calls Sync before it relies on them (one flush for many objects).
	// Backends whose writes are durable on return ignore it.
	DeferSync bool
	// IfAbsent writes only if nothing is at the path; otherwise Put fails
	// with ErrConflict and the existing object stays.
	IfAbsent bool
	// IfMatch, when set, writes only if the object at the path is still the
	// version with this Fingerprint; otherwise Put fails with ErrConflict.
	IfMatch string
	// SourceVerified says the reader itself fails (before its EOF) when
	// its bytes do not hash to SHA256, as a bundle file opened for reading
	// does: a backend may skip hashing them again. SHA256 is still stored.
	SourceVerified bool
}

// SplitLister is implemented by backends whose listing is a request per
// page, one after another (S3: 1,000 keys a page), and that can read
// several ranges of keys at once when told where to split them.
type SplitLister interface {
	// ListSplit is List(ctx, "", fn): the same objects in the same order.
	// splits are paths in increasing order, hints (they need not exist)
	// that cut the listing into ranges read at once.
	ListSplit(ctx context.Context, splits []string, fn func(ObjectInfo) error) error
}

// Sized is implemented by a reader Open returned that knows the object's
// size as it was when opened, so a reader of the whole object can size its
// buffer once instead of growing it.
type Sized interface {
	Size() int64
}

// Syncer is implemented by backends that honour PutOptions.DeferSync.
type Syncer interface {
	// Sync makes every Put that has returned durable.
	Sync(ctx context.Context) error
}

// Sync makes deferred writes to b durable; a no-op for backends that are
// durable on return.
func Sync(ctx context.Context, b Backend) error {
	if s, ok := b.(Syncer); ok {
		return s.Sync(ctx)
	}
	return nil
}

// DeferredDeleter is implemented by backends whose Delete waits until the
// removal is durable and that can skip that wait (local: the folder's
// fsync). The removal is durable after the next Sync, or after a durable
// write to the same path. Before a crash of the machine it is visible like
// any other.
type DeferredDeleter interface {
	DeleteDeferSync(ctx context.Context, paths ...string) error
	// SyncDeleted makes earlier deferred removals of paths durable, by
	// flushing only the folders that held them (cheaper than Sync).
	SyncDeleted(ctx context.Context, paths ...string) error
}

// DeleteDeferSync deletes paths, without waiting for the removal to be
// durable where b allows it (DeferredDeleter); otherwise it is Delete.
func DeleteDeferSync(ctx context.Context, b Backend, paths ...string) error {
	if d, ok := b.(DeferredDeleter); ok {
		return d.DeleteDeferSync(ctx, paths...)
	}
	return b.Delete(ctx, paths...)
}

// SyncDeleted makes earlier DeleteDeferSync removals of paths durable; a
// no-op for backends whose removals are durable on return.
func SyncDeleted(ctx context.Context, b Backend, paths ...string) error {
	if d, ok := b.(DeferredDeleter); ok {
		return d.SyncDeleted(ctx, paths...)
	}
	return nil
}

// Overwriter is implemented by backends that can rewrite a small file in
// place without a flush (local): no new file and no rename, the two
// costliest steps of a small write there. Until it returns, and after a
// crash, path may hold any mix of its old and new bytes, or zeros, and a
// reader may see such a mix: what is written this way must let a reader
// recognise a torn copy (engine: the fingerprint shards' checksum).
type Overwriter interface {
	// Overwrite replaces path's bytes with data; a missing path is
	// created (whole, not flushed).
	Overwrite(ctx context.Context, path string, data []byte) error
}

// InPlaceChecker is implemented by InPlaceWriters that can check a file's
// bytes and rewrite it through one open descriptor (local): one open per
// step instead of a read and then a write.
type InPlaceChecker interface {
	// OverwriteSyncIfEmpty is OverwriteSync of a path that is empty or
	// missing; ErrConflict, nothing written, when it holds bytes (or
	// when a missing path was created meanwhile).
	OverwriteSyncIfEmpty(ctx context.Context, path string, data []byte) error
	// EmptyDeferSyncIf is EmptyDeferSync of a path that holds exactly
	// want; ErrConflict, nothing changed, otherwise (also when missing).
	EmptyDeferSyncIf(ctx context.Context, path string, want []byte) error
}

// InPlaceWriter is implemented by backends that can rewrite a small file
// in place (local): the intent of a local root is one file rewritten by
// each publication with one data flush and no new name (so no folder
// flush), and emptied when the publication is done.
type InPlaceWriter interface {
	// OverwriteSync replaces path's bytes with data, durably on return;
	// a missing path is created durably. A crash before it returns may
	// leave path with any mix of its old and new bytes, or zeros: what is
	// written this way must let a reader recognise a torn copy
	// (engine: the intent's checksum).
	OverwriteSync(ctx context.Context, path string, data []byte) error
	// EmptyDeferSync truncates path to no bytes without waiting for that
	// to be durable; a missing path is not an error.
	EmptyDeferSync(ctx context.Context, path string) error
	// SyncEmptied makes an earlier EmptyDeferSync of path durable.
	SyncEmptied(ctx context.Context, path string) error
}

// Unsynced is implemented by backends that can compare-and-swap an object
// without making the change durable (local: no fsync), for objects that
// need not survive a crash, such as the direct-mode lock. After a crash of
// the machine such an object may be missing, an older version, or
// unreadable (torn); before one, readers see whole versions only, as with
// WriteIfVersion. The conditions are those of WriteIfVersion and
// DeleteIfVersion.
type Unsynced interface {
	WriteIfVersionNoSync(ctx context.Context, path string, data []byte, want Version) (Version, error)
	DeleteIfVersionNoSync(ctx context.Context, path string, want Version) error
}

// VersionStreamer is implemented by backends that can write a
// compare-and-swap object from a stream: a catalog of a million records
// (half a gigabyte) is written as it is encoded, never held whole.
type VersionStreamer interface {
	// WriteIfVersionFrom is WriteIfVersion with the bytes that write
	// writes. When write fails, nothing changes and its error is returned
	// (wrapped).
	WriteIfVersionFrom(ctx context.Context, path string, write func(io.Writer) error, want Version) (Version, error)
}

// VersionPreparer is implemented by backends that can write a
// compare-and-swap object in two steps: its bytes first, without a flush,
// then its name, under the condition. A publication prepares its catalog
// before the barrier (Sync) that makes its outputs durable, so that one
// barrier covers the catalog's bytes too and the commit is left with
// naming them.
type VersionPreparer interface {
	// PrepareVersion writes data as the future object at path, invisible
	// until committed. The caller must Close the result.
	PrepareVersion(ctx context.Context, path string, data []byte) (PreparedVersion, error)
}

// WritePreparer is implemented by backends whose compare-and-swap write
// is one request with work of its own before it (S3: the body's sha256,
// which signs the request and is stored with it). PrepareWrite does that
// work and nothing else: no request, nothing written. A publication
// prepares its catalog's write while its outputs are written.
type WritePreparer interface {
	PrepareWrite(path string, data []byte) PreparedVersion
}

// PreparedVersion is an object written by PrepareVersion.
type PreparedVersion interface {
	// CommitIfVersion is WriteIfVersion of the prepared bytes: durable on
	// return, whether or not a Sync ran since the prepare.
	CommitIfVersion(ctx context.Context, want Version) (Version, error)
	// Close drops the bytes if they were not committed.
	Close() error
}

// Stager is implemented by backends that can write objects no reader sees
// until they are committed (local: unnamed files). A publication stages
// every output, hashing the bundle's bytes as they pass, and names them
// only when all are complete and verified.
type Stager interface {
	// Stage begins a set of writes; the caller must Close it.
	Stage() Stage
}

// Stage is a set of staged writes.
type Stage interface {
	// Put writes like Backend.Put (the same options) into an object that
	// stays invisible, even to List, until Commit. The ObjectInfo is the
	// object's once committed (Path, Size, Fingerprint). Safe for
	// concurrent use; one Put per path.
	Put(ctx context.Context, path string, r io.Reader, size int64, opts PutOptions) (ObjectInfo, error)
	// Commit makes the object staged at path visible, under its Put's
	// conditions (IfAbsent, IfMatch: ErrConflict otherwise), checked now.
	Commit(ctx context.Context, path string) error
	// Close discards what was staged and not committed (leaving the root
	// as it was, folders included) and releases the stage.
	Close() error
}

// InfoCommitter is implemented by stages that learn a staged object's
// fingerprint only when it is committed (S3: the ETag comes with the
// write that makes the object visible). Its Put then returns no
// Fingerprint.
type InfoCommitter interface {
	// CommitInfo is Stage.Commit returning the committed object's info.
	CommitInfo(ctx context.Context, path string) (ObjectInfo, error)
}

// RootChecker is implemented by backends whose root can be swapped under
// them (a local folder moved, deleted or re-pointed).
type RootChecker interface {
	// CheckRoot returns an error wrapping ErrRootMissing when the root's
	// path names no folder, ErrRootChanged when it names another folder
	// than the one the backend writes into, nil when it is still the same.
	CheckRoot(ctx context.Context) error
}

// CheckRoot checks that b still writes into what its root path names; a
// no-op for backends without that notion (S3: a prefix has no identity).
func CheckRoot(ctx context.Context, b Backend) error {
	if c, ok := b.(RootChecker); ok {
		return c.CheckRoot(ctx)
	}
	return nil
}

// Leftover is what an interrupted write (a killed process) left behind in
// a root: a local temp file, an unfinished S3 multipart upload. Readers
// never see it (List skips it), but it holds space until removed.
type Leftover struct {
	// Path is root-relative: the temp file's own path (local), or the path
	// the upload was writing (S3).
	Path string
	// Size is the bytes it holds (S3: the parts uploaded so far).
	Size int64
	// ModTime is when it was last written (local) or started (S3).
	ModTime time.Time
	// ID is the backend's handle on it (S3: the upload ID); empty otherwise.
	ID string
}

// LeftoverCleaner is implemented by backends whose interrupted writes can
// leave something behind.
type LeftoverCleaner interface {
	// Leftovers returns the root's leftovers last written before cutoff,
	// in path order. Younger ones may be writes still in flight.
	Leftovers(ctx context.Context, cutoff time.Time) ([]Leftover, error)
	// RemoveLeftovers removes leftovers that Leftovers returned; ones
	// already gone are not an error. It never touches an object.
	RemoveLeftovers(ctx context.Context, ls []Leftover) error
}

// Backend is a destination root (or a bundle location) on some storage.
type Backend interface {
	// Stat returns the object's info or an error wrapping ErrNotExist.
	Stat(ctx context.Context, path string) (ObjectInfo, error)
	// Open streams the object's bytes; ErrNotExist when missing.
	Open(ctx context.Context, path string) (io.ReadCloser, error)
	// Put writes r (size bytes, -1 if unknown) to path atomically: readers see
	// the old object or the whole new one, never a part. A failed or cancelled
	// Put leaves the old object (or nothing) at path. It returns the new
	// object's info (Path, Size and Fingerprint at least).
	Put(ctx context.Context, path string, r io.Reader, size int64, opts PutOptions) (ObjectInfo, error)
	// Delete removes the objects; missing ones are not an error.
	Delete(ctx context.Context, paths ...string) error
	// List calls fn for every object under prefix ("" for all), in path order,
	// recursively. Folders are not objects.
	List(ctx context.Context, prefix string, fn func(ObjectInfo) error) error
	// ReadVersion returns the object's bytes and version; a missing object
	// returns (nil, "", nil).
	ReadVersion(ctx context.Context, path string) ([]byte, Version, error)
	// WriteIfVersion writes data only if the object's current version is
	// want ("" = must not exist); otherwise it fails with ErrConflict. It
	// returns the new version.
	WriteIfVersion(ctx context.Context, path string, data []byte, want Version) (Version, error)
	// DeleteIfVersion deletes the object only if its version is want;
	// otherwise ErrConflict.
	DeleteIfVersion(ctx context.Context, path string, want Version) error
	// String names the root for messages (e.g. "/srv/x" or "s3://b/p/").
	String() string
}
