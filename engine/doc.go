// Package engine runs one publication on one destination root, under a
// lease it is handed: recover, read the catalog, plan, write, delete,
// commit. The service (package service) calls it for `serve` and the
// CLI; planner decides, engine does the I/O.
//
// # Crash consistency
//
// A publication on a root runs, under the root's lease, in this order:
//
//  1. recover: finish the bookkeeping of an earlier run that died (below);
//  2. read the catalog and list the root, plan;
//  3. write the intent (.distributor/intent.json): the full records of
//     every output about to be written and the paths about to be deleted;
//  4. delete the displaced outputs: managed outputs in the way of a write
//     (a file where a folder is planned, or files under a planned file);
//  5. write the outputs' bytes (or name the staged ones), each atomically
//     (an unnamed file linked, temp + rename, or a single S3 object put),
//     so a path holds the whole old or the whole new bytes; each write is
//     conditional on what the plan saw at its path (see Fencing below);
//  6. delete the bytes of removed outputs (skipped when any write failed);
//  7. commit the catalog with a compare-and-swap on the version read in 2;
//  8. delete the intent.
//
// Step 2 streams the catalog and keeps the records the plan reads and
// every path (selected.go); the next catalog is the catalog read with the
// plan's records merged in, read again for the merge (its Reread fails
// where the bytes are not those read, and the compare-and-swap in 7 where
// the catalog changed since). A catalog of up to Engine.WholeCatalog bytes
// is parsed whole as soon as it is read and written whole: the same plan
// (the planner's on the whole catalog is the reference), cheaper where the
// catalog is small. The root writes the next catalog's bytes
// when it likes between 5 and 7 (storage.Backend.PrepareCatalog); a local
// root may leave the files its
// replacements swapped out to its stage's Close, which 8 waits for, so a
// crash before them leaves them (temp names) under the intent.
//
// Flushes: the intent is durable before step 4; the outputs are flushed
// (storage.Backend.Sync) before step 7, and the catalog is durable when 7
// returns. The removal in 8 is not waited for (storage.DeferSync): a power
// loss may bring that intent back, and rolling it forward then changes
// nothing, because every commit follows a flush of the root (or, for
// prune, a durable intent of its own that replaces it) and so no later
// commit can have changed the records it names before its deletion was
// durable.
//
// A kill between 3 and 8 leaves bytes the catalog does not describe yet:
// new outputs that would otherwise look like unmanaged content and collide
// with the retry, rewritten outputs whose record still has the old digest,
// deleted outputs whose record is still there. Recovery reads the intent
// and rolls it forward against what storage really holds: a written record
// whose object now has the intended size (and digest, where the backend
// keeps it or by re-hashing) is upserted; a deleted record whose object is
// gone is removed (an object behind a symlink planted since the plan is
// gone: it is not in the root); everything else is left as the catalog
// says. It commits
// that catalog (CAS) and deletes the intent. The retry then plans against
// a catalog that matches storage, so it converges to what an uninterrupted
// run produces, never collides with its own bytes and never loses a record.
// Unmanaged content is never touched: intended writes at unmanaged paths
// only exist when the plan adopted them (--take-ownership) or on a legacy
// first run, which rewrites those paths anyway.
//
// A write that fails (rather than a kill) takes the same path at once: the
// landed writes are rolled forward into the catalog (and the records of
// displaced outputs, already gone, dropped), the other deletes are skipped,
// and the intent stays until the next run on the root recovers it. Recovery
// also hands what the interrupted run changed to that publication's pending
// report (see Pending reports below), so the attempt that finishes reports it.
//
// Against superseded legacy state the intent is simply dropped: the retry
// is again a legacy first run and rewrites every planned path.
//
// Before step 3 every bundle file to be copied is read and hashed against
// the manifest, so a damaged bundle fails before anything is written: by
// staging every output (storage.Stage), hashing as it copies, and naming
// them only in step 5; where deletes must first make room for the
// writes' folders, in a pass of its own.
//
// # Fencing
//
// A holder that lost its lease while a write was in flight must not land it
// on a newer holder's work: new paths are written only if still absent and
// replaced ones only if they still hold the version the plan listed
// (storage.PutOptions IfAbsent / IfMatch). What conditions cannot stop is
// found by the fingerprint index (Fingerprints below) and rewritten by the
// next publication.
//
// No such holder records its writes: every commit, a recovery's included,
// first confirms the lease with its store (lease.Lease.Confirm), which sees
// a lease that an operator removed or another holder took while this one
// was paused, where its clock cannot. Its intent stays for the next
// holder, whose roll forward never records a write or delete of an older
// version of a source over a newer version's record for the same owner
// (supersedes): bytes equal to the newer version's are not the intent's,
// and different ones are damage for the next publication to rewrite.
//
// # Pending reports
//
// A publication that fails after some of its writes landed is retried later
// (the consumer redelivers the bundle event). Downstream must hear of every
// change exactly once, in the result of the attempt that finishes. So when
// recovery finishes the bookkeeping of an interrupted run, it keeps what
// that run changed in a small pending report for that publication (bundle
// event + owner) under .distributor/reports/. The next attempt of the same
// publication reports those paths with its own and removes the file; another
// publication in between (say a second destination of the same event in
// the same root) neither claims nor loses them. The same file keeps the
// result of an attempt that finished but could not deliver it
// (KeepResult): the next attempt returns it (Result.Kept) instead of
// running again. Reports that no attempt ever claims are removed after 30
// days (reportMaxAge).
//
// # Fingerprints: bytes the catalog does not describe
//
// A holder that lost its lease while one of its writes was in flight (a
// process paused past its lease, a hung request) can still land that write
// after a newer holder committed. Conditional writes stop most of them (a
// new path is written only if still absent, a replaced one only if it is
// still the version the plan saw), but not all: on a local disk the check
// and the rename are two steps, and a path the newer holder left unchanged
// still matches the stale writer's condition. Such bytes differ from their
// catalog record while size and name look right.
//
// The fingerprint index (.distributor/fingerprints/) is how the next holder
// notices without rehashing the root, like git's index: for each path it
// records the fingerprint of the stored version (local: inode, size, mtime;
// S3: ETag) together with the sha256 of the bytes that version holds, as
// known to the holder that wrote or hashed it. Any replacement of the object
// changes its fingerprint. Before planning, every output the plan would
// leave in place is checked: its listed fingerprint and the catalog's
// sha256 must match an entry; otherwise its bytes are hashed once (or its
// recorded sha256 metadata read, on S3), and bytes that differ from the
// catalog are rewritten by this publication instead of called unchanged.
//
// Entries are facts about versions, not about the catalog, so the index
// needs no compare-and-swap: an entry is trusted only when the version it
// names is still the stored one. A missing or unreadable shard costs one
// hash per output the next publication keeps, nothing else.
//
// The index is split into shards by a hash of the path, so that a
// publication reads and rewrites only the shards of the paths it checks or
// writes: adding ten outputs to a root of a million touches at most ten
// small files, not an index the size of the catalog. The number of shards
// follows the root (FingerprintShards: about 1024 entries each, 1 to 256),
// because a republish of most outputs touches every shard, and on S3 each
// is a request: a root of 1000 outputs keeps one shard, not 256.
//
// A publication to a large root (its catalog streamed) holds of the index
// only its own paths' entries. A shard it rewrites is read once, then, and
// spliced: its other lines are copied as they lie (their order and form
// checked, each not looked up in the catalog), and only the lines of the
// paths it wrote, checked again or dropped from the catalog change. Lines
// of paths that maintenance dropped from the catalog stay until a shard
// holds a quarter more lines than its share of the catalog; then each of
// its lines is checked. Like any entry, they vouch only for the exact
// versions they name.
//
// # Leftovers
//
// A process killed inside a write leaves what the backend was writing: a
// temp file beside the target (local) or an unfinished multipart upload
// (S3). Readers never see them, but they hold space forever. Finding them
// costs a walk of the whole local root (S3: a listing of uploads), which a
// publication must not pay every time, so they are removed
//   - by recovery, when it found an intent: a run was interrupted, and every
//     output write happens under an intent (only the small temp files of an
//     intent, catalog or fingerprint write killed outside one wait for the
//     next such recovery or for reconcile-state);
//   - by reconcile-state, always; verify reports them.
//
// Only leftovers untouched for LeftoverAge go: the lease excludes other
// publications, but a stale holder or a direct-mode run beside serve may
// still be writing, and its temp file keeps a recent time. The age is
// measured with the real clock, as storage stamps them.
package engine
