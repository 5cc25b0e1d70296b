// Package lease serialises work on one destination root. A publication or a
// maintenance command holds a lease on the root for its whole run. Two
// implementations share one interface: a JetStream KV lease (serve) and a
// lock object inside the root (direct mode: apply, prune, ...).
//
// # Holding a root
//
// A lease is renewed every third of its TTL while its holder runs, and
// renewal stops when the Acquire context ends or the lease is released: a
// holder that dies or stalls blocks the root for about one TTL, never for
// good. A holder counts its lease lost a SafetyMargin before it expires and
// must stop before its next mutation (Lease.Err), so that a write that
// already passed its check finishes before anyone else can take the root.
//
// Every lease carries a fencing token that orders after every earlier
// holder's (the KV key's revision; the lock object's generation and
// acquisition time); the engine records it, and storage's conditional
// writes, not the lease alone, keep a stale holder's late write off a newer
// holder's work.
//
// # Serve and direct mode together
//
// Every mutating run holds the lock object in the root, whatever else it
// holds, so that `apply` on a host without NATS and a `serve` publishing the
// same root exclude each other. serve holds the KV lease and the lock object
// as one (Both); a direct-mode run that finds NATS takes the KV lease as
// advisory (WithAdvisory): losing it to a broken connection does not stop
// the run, which the lock object fences, but losing it to another holder
// does.
//
// # One lease, several publications
//
// A holder may use one lease for several runs in a row (service.Service's
// HandOver: the publications of one process queued for a root), as long
// as they never overlap and it checks Err between them: the holder, and
// so the token, does not change, and no one else can have held the root
// in between. The renewal must then outlive the context of the run that
// acquired it (the engine gives Acquire a context of its own). The
// argument in full is in docs/guarantees.md, "Leases".
//
// lease/leasetest is the contract every Locker passes (one holder at a
// time, renewal, expiry after the holder stops, growing tokens).
package lease
