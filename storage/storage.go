package storage

import (
	"context"
	"errors"
	"io"
	"io/fs"
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

	// ErrSymlink: the path, or a folder on the way to it, is a symbolic
	// link, which a backend never follows (it may lead outside the root,
	// today or tomorrow). Retrying does not help until an operator
	// removes the link.
	ErrSymlink = errors.New("path leads through a symlink")
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

	// Symlink: the object is a symbolic link (List and Find report links,
	// never followed: they occupy their path). Every path at or below it
	// is refused with ErrSymlink, except that Delete removes the link.
	Symlink bool
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

	// InPlace lets the backend rewrite the object's bytes where they are
	// rather than replace it whole (see the Option InPlace: the bytes
	// MUST let a reader recognise a torn copy). Ignored under IfAbsent or
	// IfMatch.
	InPlace bool

	// SourceVerified says the reader itself fails (before its EOF) when
	// its bytes do not hash to SHA256, as a bundle file opened for reading
	// does: a backend may skip hashing them again. SHA256 is still stored.
	SourceVerified bool
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

// Query says what a caller of Backend.Find needs to know of a root.
type Query struct {
	// Paths are the root-relative paths the caller is about to write, in
	// increasing order; nil asks for every object.
	Paths []string

	// Held is what the root is believed to hold.
	Held Held
}

// Held describes the objects a root is believed to hold: its catalog's
// records. The zero Held is a root with no catalog.
type Held struct {
	// AtMost bounds their number from above; it is known before Paths
	// returns (from the catalog's size in bytes).
	AtMost int

	// Paths returns their number and the i-th path, in increasing order,
	// or where only some are known (a catalog read in runs of records),
	// the nearest known path at or before it. It may block until they
	// are known (a catalog still being parsed); nil when there is no
	// catalog.
	Paths func() (n int, path func(i int) string)
}

// Properties are what truly differs between backends, as data.
type Properties struct {
	// TornInPlace: a write with InPlace rewrites the object where it is,
	// so a crash may leave a torn copy (recognised by its checksum).
	// Where false, every write is whole and a torn object is damage.
	TornInPlace bool

	// Symlinks: a path may lead through a symbolic link (ErrSymlink).
	// Where false, none does, and a caller need not look for links.
	Symlinks bool

	// HeldFolder is the folder the backend holds open as its root, where
	// it holds one (a local folder); nil otherwise (an S3 prefix). A
	// caller compares it with what a path names now (os.SameFile).
	HeldFolder fs.FileInfo
}

// Option tunes Open, WriteIfVersion, DeleteIfVersion and ReadVersion. A
// backend honours DeferSync and InPlace where that costs less, and ignores
// them otherwise (S3 ignores both: every request is durable and whole on
// return); every backend honours Versioned.
type Option uint8

const (
	// DeferSync lets the change be durable only after the next Sync:
	// until then a crash of the machine may lose it, bring back an older
	// version, or tear it (the direct-mode lock, an emptied intent).
	// Readers see whole versions all along.
	DeferSync Option = 1 << iota

	// InPlace lets the backend rewrite the object where it is rather than
	// replace it: a crash before the change is durable may leave any mix
	// of its old and new bytes, or zeros (Properties.TornInPlace), so what
	// is written this way MUST let a reader recognise a torn copy (a
	// checksum). DeleteIfVersion may empty the object rather than remove
	// it; an empty object is none to ReadVersion and WriteIfVersion under
	// InPlace. Versions of such an object are those ReadVersion returns
	// under InPlace.
	InPlace

	// Versioned (Open) asks for the version of the bytes read and for a
	// second read of them (Reader.Version, Reader.Reread): what a reader
	// of a document it will replace by compare-and-swap needs. It costs a
	// checksum of the bytes as they pass.
	Versioned
)

// HasOption reports whether opts hold o.
func HasOption(opts []Option, o Option) bool {
	for _, x := range opts {
		if x&o != 0 {
			return true
		}
	}
	return false
}

// Reader is an opened object: its bytes, and its size as it was when
// opened (-1 when unknown), so a reader of the whole object sizes its
// buffer once. Opened with Versioned, it also tells their version and
// reads them again; those are nil otherwise.
type Reader struct {
	io.ReadCloser
	Size int64

	// Version is the version of the bytes read, as ReadVersion returns
	// it, once Read returned io.EOF; an error before that.
	Version func() (Version, error)

	// Reread opens the same bytes again from their start, until Close:
	// its reader fails, at the latest at its end, with an error wrapping
	// ErrConflict where they are not the bytes read (the object changed).
	Reread func(ctx context.Context) (io.ReadCloser, error)
}

// Source opens the bytes of a write from their start. A backend may call
// it more than once (a staged write it does not keep reads them again
// when it names them); each reader it returns, it closes.
type Source func(ctx context.Context) (io.ReadCloser, error)

// Document is what PrepareCatalog writes: a document the backend encodes
// when it likes.
type Document struct {
	// Path is where it goes (root-relative).
	Path string

	// Records is how many records it holds: large ones may be encoded as
	// they are written, never held whole.
	Records int

	// Encode writes its bytes; an error from it fails the commit, nothing
	// written.
	Encode func(w io.Writer) error
}

// Backend is a destination root (or a bundle location) on some storage.
// Every backend implements every method; where an operation has nothing
// to do on a backend (Sync on S3, whose writes are durable on return), it
// says so and does nothing. Paths are root-relative and '/'-separated;
// a backend refuses a path that is not valid (one a catalog could not
// record) or that would leave the root.
type Backend interface {
	// Stat returns the object's info or an error wrapping ErrNotExist.
	Stat(ctx context.Context, path string) (ObjectInfo, error)

	// Open streams the object's bytes; ErrNotExist when missing. With
	// Versioned the reader also tells their version once read and reads
	// them again (Reader.Version, Reader.Reread), holding none of them (a
	// catalog of half a gigabyte). The caller MUST Close it.
	Open(ctx context.Context, path string, opts ...Option) (Reader, error)

	// List calls fn for every object under prefix ("" for all), in path
	// order, recursively. Folders, leftovers of interrupted writes and
	// things that are not regular objects are not objects.
	List(ctx context.Context, prefix string, fn func(ObjectInfo) error) error

	// Find calls fn for every object a write of q.Paths must know of:
	// each object at one of them, at a folder on the way to one of them,
	// and under one of them; with nil q.Paths, every object. It MAY call
	// fn for any other object as well (listing the whole root where that
	// costs less than looking the paths up), never twice for one object,
	// in no particular order. q.Held lets it choose how.
	Find(ctx context.Context, q Query, fn func(ObjectInfo) error) error

	// Put writes r (size bytes, -1 if unknown) to path atomically: readers
	// see the old object or the whole new one, never a part. A failed or
	// cancelled Put leaves the old object (or nothing) at path. Under
	// opts.IfAbsent or opts.IfMatch a lost condition is ErrConflict and
	// changes nothing. It returns the new object's info (Path, Size and
	// Fingerprint at least; Path and Size under opts.InPlace). With
	// opts.DeferSync the object is durable after the next Sync; otherwise
	// when Put returns.
	Put(ctx context.Context, path string, r io.Reader, size int64, opts PutOptions) (ObjectInfo, error)

	// Delete removes the objects, durably on return; missing ones are not
	// an error.
	Delete(ctx context.Context, paths ...string) error

	// Stage begins a set of writes that no reader sees until each is
	// committed. The caller MUST Close it.
	Stage(ctx context.Context) Stage

	// Sync makes every change made with DeferSync that returned (Put,
	// Stage.Put, WriteIfVersion, DeleteIfVersion) durable, and may write
	// pending catalogs' bytes in the same flush (their Commit is durable
	// either way). It flushes only what is dirty: a Sync after one
	// emptied intent costs that file's flush, not the root's; after
	// nothing, nothing.
	Sync(ctx context.Context) error

	// ReadVersion returns the object's bytes and version; a missing
	// object returns (nil, "", nil). See InPlace for opts.
	ReadVersion(ctx context.Context, path string, opts ...Option) ([]byte, Version, error)

	// WriteIfVersion writes data only if the object's current version is
	// want ("" = must not exist); otherwise ErrConflict, nothing written.
	// Durable on return unless opts hold DeferSync; it returns the new
	// version.
	WriteIfVersion(ctx context.Context, path string, data []byte, want Version, opts ...Option) (Version, error)

	// DeleteIfVersion deletes the object only if its version is want;
	// otherwise ErrConflict. Durable on return unless opts hold DeferSync.
	DeleteIfVersion(ctx context.Context, path string, want Version, opts ...Option) error

	// PrepareCatalog begins writing doc as the root's catalog and returns
	// at once; the backend encodes and writes its bytes when it likes
	// before PendingCatalog.Commit. writes is how many objects the caller
	// writes before that Commit (0: Commit follows at once). The caller
	// MUST Close the result.
	PrepareCatalog(ctx context.Context, doc Document, writes int) PendingCatalog

	// CheckRoot returns an error wrapping ErrRootMissing when the root's
	// path names no folder any more, ErrRootChanged when it names another
	// one than the backend writes into, nil otherwise (always nil where a
	// root has no identity: an S3 prefix).
	CheckRoot(ctx context.Context) error

	// Leftovers returns what interrupted writes left in the root, last
	// written before cutoff, in path order (younger ones may be writes in
	// flight). Nothing on a backend whose writes leave nothing.
	Leftovers(ctx context.Context, cutoff time.Time) ([]Leftover, error)

	// RemoveLeftovers removes leftovers that Leftovers returned; ones
	// already gone are not an error. It never touches an object.
	RemoveLeftovers(ctx context.Context, ls []Leftover) error

	// Properties says how this backend differs from others.
	Properties() Properties

	// String names the root for messages (e.g. "/srv/x" or "s3://b/p/").
	String() string
}

// Stage is a set of writes that no reader sees until committed.
type Stage interface {
	// Put writes src like Backend.Put (the same options) into an object
	// that stays invisible, even to List, until Commit. Safe for
	// concurrent use; one Put per path. When it returns, src's bytes were
	// read to their end and checked; a backend that keeps nothing of them
	// (an object too large to stage) opens src again at Commit.
	Put(ctx context.Context, path string, src Source, size int64, opts PutOptions) (ObjectInfo, error)

	// Commit makes the object staged at path visible, under its Put's
	// conditions (IfAbsent, IfMatch: ErrConflict otherwise), checked now,
	// and returns its info (Path, Size, Fingerprint).
	Commit(ctx context.Context, path string) (ObjectInfo, error)

	// Close discards what was staged and not committed (leaving the root
	// as it was, folders included), finishes what the commits began, and
	// releases the stage.
	Close() error
}

// PendingCatalog is a catalog Backend.PrepareCatalog is writing.
type PendingCatalog interface {
	// Commit makes the catalog the root's only if the current catalog's
	// version is want ("" = none), durably on return; otherwise
	// ErrConflict, nothing changed. It fails with ErrRootMissing or
	// ErrRootChanged (CheckRoot) rather than write into another folder,
	// and with the error of Document.Encode, nothing written.
	Commit(ctx context.Context, want Version) (Version, error)

	// Close drops the bytes if they were not committed.
	Close() error
}
