// Package storage is the one small interface every destination backend
// (local folder, S3 prefix) satisfies. Paths are root-relative and
// '/'-separated; backends confine them to the root.
//
// # What the engine relies on
//
// The engine's guarantees rest on a few promises every backend keeps
// (storage/storagetest checks the first three on every backend alike; each
// backend's own tests map its errors onto the classes):
//
//   - A Put is atomic: readers see the whole old object or the whole new
//     one, and a failed or cancelled Put leaves the old one.
//   - Writes can be conditional: IfAbsent and IfMatch (a Fingerprint) for
//     data, WriteIfVersion and DeleteIfVersion (a Version) for the catalog
//     and the lock object. A lost condition is ErrConflict and changes
//     nothing; this is what fences a stale lease holder.
//   - A Fingerprint names one stored version cheaply (local: inode, size,
//     time; S3: the ETag); the engine's fingerprint index pairs it with
//     the digest of the bytes it holds.
//   - Errors fall into classes the engine classifies once: ErrNotExist,
//     ErrConflict, ErrUnavailable (retry later), ErrDenied, ErrRootMissing
//     and ErrRootChanged (an operator must act, or the root is reopened).
//
// Optional interfaces let a backend offer more, and callers use them
// through helpers that are no-ops where they do not apply: Syncer (one
// flush for many deferred writes: Sync), Stager (writes no reader sees
// until named), RootChecker (the root is still the folder it was:
// CheckRoot) and LeftoverCleaner (what an interrupted write left).
package storage
