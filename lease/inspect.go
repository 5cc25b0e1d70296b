package lease

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/distributor/distributor/internal/process"
	"github.com/distributor/distributor/storage"
)

// Holder is who a root's lease record names, as an operator reads it
// (`distributor status`): read-only, taking and changing nothing.
type Holder struct {
	// Holder names the process ("serve v1.2 on host pid 42").
	Holder string `json:"holder,omitempty"`
	// Host and PID: the lock object's holder process.
	Host string `json:"host,omitempty"`
	PID  int    `json:"pid,omitempty"`
	// Acquired is when the holder took it; Expires when it lapses unless
	// renewed.
	Acquired time.Time `json:"acquired,omitzero"`
	Expires  time.Time `json:"expires,omitzero"`
	// Stale: the next run takes it over at once: it expired, its holder
	// process on this host is gone, or (Unreadable) it is torn.
	Stale bool `json:"stale"`
	// Unreadable: the lock object does not decode (what a crash of the
	// machine leaves of an unsynced write).
	Unreadable bool `json:"unreadable,omitempty"`
}

// ReadLock reads the lock object in root (LockPath); ok is false when there
// is none (nobody holds the root in direct mode). now decides Stale.
func ReadLock(ctx context.Context, root storage.Backend, now time.Time) (h Holder, ok bool, err error) {
	data, v, err := root.ReadVersion(ctx, LockPath)
	if err != nil {
		return Holder{}, false, fmt.Errorf("read lock %s/%s: %w", root, LockPath, err)
	}
	if v == "" {
		return Holder{}, false, nil
	}
	var rec lockRecord
	if json.Unmarshal(data, &rec) != nil {
		return Holder{Stale: true, Unreadable: true}, true, nil
	}
	h = Holder{Holder: rec.Holder, Host: rec.Host, PID: rec.PID, Acquired: rec.Acquired.UTC(), Expires: rec.Expires.UTC()}
	host, _ := os.Hostname()
	gone := rec.Host == host && rec.PID > 0 && !process.Alive(rec.PID)
	h.Stale = !now.Before(rec.Expires) || gone
	return h, true, nil
}

// ReadKV reads the KV lease of the root named rootKey (see KVKey) in the
// bucket kv; ok is false when nobody holds it. The expiry is the last
// renewal's time on the server plus the holder's TTL.
func ReadKV(ctx context.Context, kv jetstream.KeyValue, rootKey string, now time.Time) (h Holder, ok bool, err error) {
	e, err := kv.Get(ctx, KVKey(rootKey))
	if errors.Is(err, jetstream.ErrKeyNotFound) || errors.Is(err, jetstream.ErrKeyDeleted) {
		return Holder{}, false, nil
	}
	if err != nil {
		return Holder{}, false, fmt.Errorf("read the lease of %s in bucket %s: %w", rootKey, kv.Bucket(), err)
	}
	var rec kvRecord
	if json.Unmarshal(e.Value(), &rec) != nil {
		return Holder{Holder: "an unknown holder", Stale: false}, true, nil
	}
	h = Holder{Holder: rec.Holder, Acquired: rec.Acquired.UTC()}
	if ttl, err := time.ParseDuration(rec.TTL); err == nil {
		h.Expires = e.Created().UTC().Add(ttl)
		h.Stale = !now.Before(h.Expires)
	}
	return h, true, nil
}
