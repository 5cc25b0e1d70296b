// Package storage is the one contract every destination backend (local
// folder, S3 prefix) implements in full: storage.Backend, with the Stage
// and PendingCatalog it hands out. Paths are root-relative and
// '/'-separated; backends confine them to the root.
//
// # What the engine relies on
//
// The engine's guarantees rest on a few promises every backend keeps
// (storage/storagetest checks each method's contract on every backend
// alike; each backend's own tests map its errors onto the classes):
//
//   - A Put is atomic: readers see the whole old object or the whole new
//     one, and a failed or cancelled Put leaves the old one. A Stage names
//     its objects only at Commit.
//   - Writes can be conditional: IfAbsent and IfMatch (a Fingerprint) for
//     data, WriteIfVersion and DeleteIfVersion (a Version) for the
//     catalog, the lock object and the intent. A lost condition is
//     ErrConflict and changes nothing; this is what fences a stale lease
//     holder.
//   - A Fingerprint names one stored version cheaply (local: inode, size,
//     time; S3: the ETag); the engine's fingerprint index pairs it with
//     the digest of the bytes it holds.
//   - Errors fall into classes the engine classifies once: ErrNotExist,
//     ErrConflict, ErrUnavailable (retry later), ErrDenied, ErrRootMissing
//     and ErrRootChanged (an operator must act, or the root is reopened).
//
// The engine makes one call per step and never asks what a backend can
// do: where an operation has nothing to do on a backend (Sync on S3), the
// backend does nothing, and how a step is done fast (a listing split
// into ranges, a catalog encoded beside the writes, a small file
// rewritten in place, a flush of only what is dirty) is the backend's
// choice. The caller may allow a cheaper way (DeferSync, InPlace); a
// backend honours or ignores it. What truly differs is data: Properties.
package storage
