package lease

import (
	"context"
	"os"
	"testing"
	"time"

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
	if _, ok, err := ReadLock(ctx, store, time.Now()); ok || err != nil {
		t.Fatalf("free root: ok %v, err %v", ok, err)
	}
	at := time.Date(2026, 6, 19, 12, 0, 0, 0, time.UTC)
	l, err := NewStorageLocker("apply test", time.Minute, WithClock(func() time.Time { return at }), WithProcess("elsewhere", 42, func(int) bool { return true })).
		Acquire(ctx, root)
	if err != nil {
		t.Fatal(err)
	}
	want := Holder{Holder: "apply test", Host: "elsewhere", PID: 42, Acquired: at, Expires: at.Add(time.Minute)}
	if h, ok, err := ReadLock(ctx, store, at.Add(time.Second)); !ok || err != nil || h != want {
		t.Fatalf("held lock: %+v, %v, %v; want %+v", h, ok, err, want)
	}
	want.Stale = true
	if h, ok, err := ReadLock(ctx, store, at.Add(time.Minute)); !ok || err != nil || h != want {
		t.Fatalf("expired lock: %+v, %v, %v; want %+v", h, ok, err, want)
	}
	if err := l.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if _, ok, err := ReadLock(ctx, store, at); ok || err != nil {
		t.Fatalf("released lock: ok %v, err %v", ok, err)
	}
	if _, err := store.WriteIfVersion(ctx, LockPath, nil, ""); err != nil {
		t.Fatal(err)
	}
	if h, ok, err := ReadLock(ctx, store, at); !ok || err != nil || h != (Holder{Stale: true, Unreadable: true}) {
		t.Fatalf("torn lock: %+v, %v, %v", h, ok, err)
	}
	// A holder on this host whose process is gone is stale at once.
	host, _ := os.Hostname()
	if err := store.Overwrite(ctx, LockPath, []byte(`{"holder":"gone","host":"`+host+`","pid":1073741824,"expires":"2999-01-01T00:00:00Z"}`)); err != nil {
		t.Fatal(err)
	}
	if h, ok, err := ReadLock(ctx, store, at); !ok || err != nil || !h.Stale || h.Holder != "gone" {
		t.Fatalf("lock of a gone process: %+v, %v, %v", h, ok, err)
	}
}

// ReadKV names the KV lease's holder with the expiry of its last renewal,
// and nothing once it is released.
func TestReadKV(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	env := newKVEnv(t)
	root := Root{Key: "file:///srv/reports/"}
	if _, ok, err := ReadKV(ctx, env.kv, root.Key, time.Now()); ok || err != nil {
		t.Fatalf("free root: ok %v, err %v", ok, err)
	}
	before := time.Now().Add(-time.Second)
	l, err := env.locker("serve test", 30*time.Second).Acquire(ctx, root)
	if err != nil {
		t.Fatal(err)
	}
	h, ok, err := ReadKV(ctx, env.kv, root.Key, time.Now())
	if !ok || err != nil || h.Holder != "serve test" || h.Stale || h.Acquired.Before(before) ||
		h.Expires.Before(before.Add(30*time.Second)) || h.Expires.After(time.Now().Add(31*time.Second)) {
		t.Fatalf("held lease: %+v, %v, %v", h, ok, err)
	}
	if h, _, _ := ReadKV(ctx, env.kv, root.Key, time.Now().Add(time.Minute)); !h.Stale {
		t.Fatalf("a lease past its expiry is not stale: %+v", h)
	}
	if err := l.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if _, ok, err := ReadKV(ctx, env.kv, root.Key, time.Now()); ok || err != nil {
		t.Fatalf("released lease: ok %v, err %v", ok, err)
	}
}
