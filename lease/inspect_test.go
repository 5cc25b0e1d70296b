package lease

import (
	"bytes"
	"context"
	"os"
	"testing"
	"time"

	"github.com/distributor/distributor/storage"
	"github.com/distributor/distributor/storage/local"
)

// ReadLock names the lock object's holder and its expiry, says when the
// next run would take it over (expired, or torn), and nothing when the
// root is free; it never changes the lock.
func TestReadLock(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	store, err := local.New(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	root := Root{Key: "file:///r/", Store: store}
	if h, err := ReadLock(ctx, store, time.Now()); h != nil || err != nil {
		t.Fatalf("free root: %+v, %v", h, err)
	}
	at := time.Date(2026, 6, 19, 12, 0, 0, 0, time.UTC)
	l, err := NewStorageLocker("apply test", time.Minute, WithClock(func() time.Time { return at }), WithProcess("elsewhere", 42, func(int) bool { return true })).
		Acquire(ctx, root)
	if err != nil {
		t.Fatal(err)
	}
	h, err := ReadLock(ctx, store, at.Add(time.Second))
	if err != nil || h == nil || h.ID == "" {
		t.Fatalf("held lock: %+v, %v; want one with an id", h, err)
	}
	want := Holding{Kind: KindLockObject, ID: h.ID, Holder: "apply test", Host: "elsewhere", PID: 42, Acquired: at, Expires: at.Add(time.Minute)}
	if *h != want {
		t.Fatalf("held lock: %+v; want %+v", *h, want)
	}
	want.Stale = true
	if h, err := ReadLock(ctx, store, at.Add(time.Minute)); err != nil || h == nil || *h != want {
		t.Fatalf("expired lock: %+v, %v; want %+v", h, err, want)
	}
	if err := l.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if h, err := ReadLock(ctx, store, at); h != nil || err != nil {
		t.Fatalf("released lock: %+v, %v", h, err)
	}
	if _, err := store.WriteIfVersion(ctx, LockPath, nil, ""); err != nil {
		t.Fatal(err)
	}
	if h, err := ReadLock(ctx, store, at); err != nil || h == nil || !h.Stale || !h.Unreadable {
		t.Fatalf("torn lock: %+v, %v", h, err)
	}
	// A lock whose expiry lies further ahead than any lease distributor
	// gives was stamped by a clock that ran ahead: stale, as the next run
	// takes it over at once.
	if _, err := store.Put(ctx, LockPath, bytes.NewReader([]byte(`{"holder":"ahead","host":"elsewhere","pid":42,"expires":"`+at.Add(time.Hour).Format(time.RFC3339)+`"}`)), -1, storage.PutOptions{}); err != nil {
		t.Fatal(err)
	}
	if h, err := ReadLock(ctx, store, at); err != nil || h == nil || !h.Stale || h.Holder != "ahead" {
		t.Fatalf("lock from a clock that ran ahead: %+v, %v", h, err)
	}
	// A holder on this host whose process is gone is stale at once.
	host, _ := os.Hostname()
	if _, err := store.Put(ctx, LockPath, bytes.NewReader([]byte(`{"holder":"gone","host":"`+host+`","pid":1073741824,"expires":"2999-01-01T00:00:00Z"}`)), -1, storage.PutOptions{}); err != nil {
		t.Fatal(err)
	}
	if h, err := ReadLock(ctx, store, at); err != nil || h == nil || !h.Stale || h.Holder != "gone" {
		t.Fatalf("lock of a gone process: %+v, %v", h, err)
	}
}

// ReadKV names the KV lease's holder with the expiry of its last renewal,
// and nothing once it is released.
func TestReadKV(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	env := newKVEnv(t)
	root := Root{Key: "file:///srv/reports/"}
	if h, err := ReadKV(ctx, env.kv, root.Key, time.Now()); h != nil || err != nil {
		t.Fatalf("free root: %+v, %v", h, err)
	}
	before := time.Now().Add(-time.Second)
	l, err := env.locker("serve test", 30*time.Second).Acquire(ctx, root)
	if err != nil {
		t.Fatal(err)
	}
	h, err := ReadKV(ctx, env.kv, root.Key, time.Now())
	if h == nil || err != nil || h.Kind != KindKVLease || h.ID == "" || h.Holder != "serve test" || h.Stale || h.Acquired.Before(before) ||
		h.Expires.Before(before.Add(30*time.Second)) || h.Expires.After(time.Now().Add(31*time.Second)) {
		t.Fatalf("held lease: %+v, %v", h, err)
	}
	if h, _ := ReadKV(ctx, env.kv, root.Key, time.Now().Add(time.Minute)); h == nil || !h.Stale {
		t.Fatalf("a lease past its expiry is not stale: %+v", h)
	}
	if err := l.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if h, err := ReadKV(ctx, env.kv, root.Key, time.Now()); h != nil || err != nil {
		t.Fatalf("released lease: %+v, %v", h, err)
	}
}
