package lease

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/distributor/distributor/internal/process"
	"github.com/distributor/distributor/storage"
)

// MaxTTL is the longest TTL distributor gives a lease (direct mode's lock
// object). A lock object whose expiry lies further ahead than MaxTTL (or
// the TTL of the locker that finds it, if longer) was written by a clock
// that ran ahead: it is treated as expired.
const MaxTTL = 2 * time.Minute

// ErrWrongID: unlock was given an id that is not the one of the lock the
// root holds; nothing was removed.
var ErrWrongID = errors.New("lock id does not match")

// Kinds of Holding.
const (
	KindLockObject = "lock_object" // .distributor/lock in the root
	KindKVLease    = "kv_lease"    // the root's key in the lease bucket
)

// Holding describes a lock object or KV lease on a root, as an operator
// reads it (`distributor status`, `distributor unlock`): who holds it and
// the id that unlock needs. Reading it takes and changes nothing.
type Holding struct {
	Kind string `json:"kind"`
	ID   string `json:"id"`

	// Holder names the process ("serve v1.2 on host pid 42"); Host and PID
	// are the lock object's holder process.
	Holder   string    `json:"holder"`
	Host     string    `json:"host,omitempty"`
	PID      int       `json:"pid,omitempty"`
	Acquired time.Time `json:"acquired,omitzero"`

	// Expires is when it lapses unless renewed: the lock object's expiry,
	// or the KV lease's last renewal on the server plus its TTL.
	Expires time.Time `json:"expires,omitzero"`
	TTL     string    `json:"ttl,omitempty"`

	// Stale: the next run takes it over at once: it expired, its holder
	// process on this host is gone, or (Unreadable) it is torn.
	Stale bool `json:"stale"`

	// Unreadable: the lock object does not decode (what a crash of the
	// machine leaves of an unsynced write).
	Unreadable bool `json:"unreadable,omitempty"`
}

// newID returns a fresh lock id: 16 random hex digits.
func newID() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

type idKey struct{}

// withID makes the lockers that acquire with ctx record id, so that the
// leases Both holds on one root carry one id.
func withID(ctx context.Context, id string) context.Context {
	return context.WithValue(ctx, idKey{}, id)
}

// idFor is the id ctx carries (withID), or a fresh one.
func idFor(ctx context.Context) string {
	if id, ok := ctx.Value(idKey{}).(string); ok {
		return id
	}
	return newID()
}

// unlockHint ends a "held" error with the command that breaks the lock.
func unlockHint(root Root, id string) string {
	if id == "" {
		return "" // written by an older distributor: it expires on its own
	}
	dest := root.Destination
	if dest == "" {
		dest = "<destination>"
	}
	return fmt.Sprintf("; if that holder is gone, break the lock with `distributor unlock --destination %s --id %s`", dest, id)
}

// unlockNow is the unlock command for a holder that stopped renewing, or
// "" when the lease has no id.
func unlockNow(root Root, id string) string {
	if id == "" {
		return ""
	}
	dest := root.Destination
	if dest == "" {
		dest = "<destination>"
	}
	return fmt.Sprintf(", or break it now with `distributor unlock --destination %s --id %s`", dest, id)
}

// ReadLock returns the root's lock object, or nil when there is none
// (nobody holds the root in direct mode). now decides Stale.
func ReadLock(ctx context.Context, store storage.Backend, now time.Time) (*Holding, error) {
	h, _, err := readLock(ctx, store)
	h.judge(now)
	return h, err
}

// judge sets h.Stale as of now: expired, its holder process on this host
// gone or its expiry further ahead than MaxTTL (lock objects: a clock that
// ran ahead), or unreadable.
func (h *Holding) judge(now time.Time) {
	switch {
	case h == nil:
	case h.Unreadable:
		h.Stale = true
	case h.Kind == KindLockObject:
		host, _ := os.Hostname()
		gone := h.Host == host && h.PID > 0 && !process.Alive(h.PID)
		h.Stale = !now.Before(h.Expires) || gone || h.Expires.After(now.Add(MaxTTL))
	case !h.Expires.IsZero():
		h.Stale = !now.Before(h.Expires)
	}
}

func readLock(ctx context.Context, store storage.Backend) (*Holding, storage.Version, error) {
	data, v, err := store.ReadVersion(ctx, LockPath)
	if err != nil {
		return nil, "", fmt.Errorf("read lock %s%s: %w", store, LockPath, err)
	}
	if v == "" {
		return nil, "", nil
	}
	var rec lockRecord
	if err := json.Unmarshal(data, &rec); err != nil {
		// Torn by a crash of the machine: the next run takes it over.
		return &Holding{Kind: KindLockObject, Holder: "an unreadable lock (taken over by the next run)", Stale: true, Unreadable: true}, v, nil
	}
	return &Holding{Kind: KindLockObject, ID: rec.ID, Holder: rec.Holder, Host: rec.Host, PID: rec.PID,
		Acquired: rec.Acquired.UTC(), Expires: rec.Expires.UTC()}, v, nil
}

// UnlockObject removes the root's lock object if its id is id, and returns
// what it removed: nil when the root has none. Another id is ErrWrongID,
// and the lock is left alone.
func UnlockObject(ctx context.Context, store storage.Backend, id string) (*Holding, error) {
	h, v, err := readLock(ctx, store)
	if err != nil || h == nil {
		return nil, err
	}
	h.judge(time.Now())
	if h.ID != id {
		return h, fmt.Errorf("%w: the lock object of %s has id %q, not %q; nothing was removed", ErrWrongID, store, h.ID, id)
	}
	err = deleteLock(ctx, store, v)
	if errors.Is(err, storage.ErrConflict) || errors.Is(err, storage.ErrNotExist) {
		return nil, fmt.Errorf("the lock object of %s changed while it was being removed (renewed, released or taken over): %w", store, err)
	}
	if err != nil {
		return nil, fmt.Errorf("remove lock %s%s: %w", store, LockPath, err)
	}
	return h, nil
}

// ReadKV returns the KV lease of the root named rootKey (see KVKey), or
// nil when it is not held. now decides Stale.
func ReadKV(ctx context.Context, kv jetstream.KeyValue, rootKey string, now time.Time) (*Holding, error) {
	h, _, err := readKV(ctx, kv, rootKey)
	h.judge(now)
	return h, err
}

func readKV(ctx context.Context, kv jetstream.KeyValue, rootKey string) (*Holding, uint64, error) {
	e, err := kv.Get(ctx, KVKey(rootKey))
	if errors.Is(err, jetstream.ErrKeyNotFound) || errors.Is(err, jetstream.ErrKeyDeleted) {
		return nil, 0, nil
	}
	if err != nil {
		return nil, 0, fmt.Errorf("read the lease on %s in bucket %s: %w", rootKey, kv.Bucket(), err)
	}
	var rec kvRecord
	if json.Unmarshal(e.Value(), &rec) != nil || rec.Holder == "" {
		rec.Holder = "an unknown holder"
	}
	h := &Holding{Kind: KindKVLease, ID: rec.ID, Holder: rec.Holder, Acquired: rec.Acquired.UTC(), TTL: rec.TTL}
	if ttl, err := time.ParseDuration(rec.TTL); err == nil {
		h.Expires = e.Created().UTC().Add(ttl)
	}
	return h, e.Revision(), nil
}

// UnlockKV removes the KV lease of the root named rootKey if its id is
// id, and returns what it removed: nil when it is not held. Another id is
// ErrWrongID, and the lease is left alone.
func UnlockKV(ctx context.Context, kv jetstream.KeyValue, rootKey, id string) (*Holding, error) {
	h, rev, err := readKV(ctx, kv, rootKey)
	if err != nil || h == nil {
		return nil, err
	}
	h.judge(time.Now())
	if h.ID != id {
		return h, fmt.Errorf("%w: the lease on %s in bucket %s has id %q, not %q; nothing was removed", ErrWrongID, rootKey, kv.Bucket(), h.ID, id)
	}
	err = kv.Delete(ctx, KVKey(rootKey), jetstream.LastRevision(rev))
	if wrongLastSequence(err) || errors.Is(err, jetstream.ErrKeyNotFound) {
		return nil, fmt.Errorf("the lease on %s changed while it was being removed (renewed, released or taken over): %w", rootKey, err)
	}
	if err != nil {
		return nil, fmt.Errorf("remove the lease on %s in bucket %s: %w", rootKey, kv.Bucket(), err)
	}
	return h, nil
}
