package lease

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/distributor/distributor/storage/local"
	"github.com/distributor/distributor/testenv"
)

// forEachStore runs fn on a local root and an S3 root.
func forEachStore(t *testing.T, fn func(t *testing.T, root Root)) {
	t.Run("local", func(t *testing.T) {
		t.Parallel()
		dir := t.TempDir()
		b, err := local.New(dir)
		if err != nil {
			t.Fatal(err)
		}
		fn(t, Root{Key: "file://" + dir + "/", Store: b, Destination: "site"})
	})
	t.Run("s3", func(t *testing.T) {
		t.Parallel()
		srv := testenv.NewS3(t)
		bucket := srv.Bucket(t)
		fn(t, Root{Key: "s3://" + bucket + "/site/", Store: srv.Backend(t, bucket, "site/"), Destination: "site"})
	})
}

// abandon acquires root's lock object as a run on another host that then
// stops renewing it (as a crashed one does): it stays until it expires.
func abandon(t *testing.T, root Root) *Holding {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	gone := NewStorageLocker("direct dev on otherhost pid 4242", MaxTTL, WithProcess("otherhost", 4242, func(int) bool { return true }))
	if _, err := gone.Acquire(ctx, root); err != nil {
		t.Fatal(err)
	}
	cancel()
	h, err := ReadLock(context.Background(), root.Store, time.Now())
	if err != nil || h == nil || len(h.ID) != 16 {
		t.Fatalf("ReadLock = %+v, %v; want the lock with a 16-digit id", h, err)
	}
	return h
}

// TestUnlockObject: a lock object left by a run that is gone blocks the
// root, and the error names its id and the command that breaks it; unlock
// with another id removes nothing (ErrWrongID), with its id removes it,
// and the root is free. Local and S3 roots.
func TestUnlockObject(t *testing.T) {
	t.Parallel()
	forEachStore(t, func(t *testing.T, root Root) {
		ctx := context.Background()
		h := abandon(t, root)
		if h.Kind != KindLockObject || h.Holder != "direct dev on otherhost pid 4242" || h.Host != "otherhost" || h.PID != 4242 ||
			!h.Expires.Equal(h.Acquired.Add(MaxTTL)) {
			t.Errorf("lock %+v", *h)
		}
		_, err := NewStorageLocker("me", time.Minute).Acquire(ctx, root)
		hint := "lock id " + h.ID + "; if that holder is gone, break the lock with `distributor unlock --destination site --id " + h.ID + "`"
		if !errors.Is(err, ErrHeld) || !strings.Contains(err.Error(), "is locked by direct dev on otherhost pid 4242 (pid 4242 on otherhost) until ") ||
			!strings.HasSuffix(err.Error(), hint) {
			t.Fatalf("Acquire of the abandoned root: %v\nwant ErrHeld ending in %q", err, hint)
		}

		got, err := UnlockObject(ctx, root.Store, "0123456789abcdef")
		if !errors.Is(err, ErrWrongID) || got == nil || got.ID != h.ID {
			t.Fatalf("UnlockObject with another id: %+v, %v; want ErrWrongID naming the lock", got, err)
		}
		if still, _ := ReadLock(ctx, root.Store, time.Now()); still == nil || still.ID != h.ID {
			t.Fatalf("the lock is gone after an unlock with another id: %+v", still)
		}
		got, err = UnlockObject(ctx, root.Store, h.ID)
		if err != nil || got == nil || *got != *h {
			t.Fatalf("UnlockObject: %+v, %v; want %+v removed", got, err, *h)
		}
		if gone, err := ReadLock(ctx, root.Store, time.Now()); gone != nil || err != nil {
			t.Fatalf("ReadLock after unlock: %+v, %v", gone, err)
		}
		if got, err := UnlockObject(ctx, root.Store, h.ID); got != nil || err != nil {
			t.Fatalf("UnlockObject of an unlocked root: %+v, %v; want nothing", got, err)
		}
		l, err := NewStorageLocker("me", time.Minute).Acquire(ctx, root)
		if err != nil {
			t.Fatalf("Acquire after unlock: %v", err)
		}
		_ = l.Release(ctx)
	})
}

// TestLockFromTheFuture: a lock object whose expiry lies beyond MaxTTL (a
// holder whose clock ran ahead) is taken over with a warning; one that
// expires within MaxTTL still holds the root. Local and S3 roots.
func TestLockFromTheFuture(t *testing.T) {
	t.Parallel()
	forEachStore(t, func(t *testing.T, root Root) {
		ctx := context.Background()
		now := time.Now().UTC()
		write := func(expires time.Time) {
			data, _ := json.Marshal(lockRecord{ID: "feedfacefeedface", Holder: "direct", Host: "otherhost", PID: 4242,
				Acquired: expires.Add(-MaxTTL), Expires: expires, Generation: 3})
			_, v, err := root.Store.ReadVersion(ctx, LockPath)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := root.Store.WriteIfVersion(ctx, LockPath, data, v); err != nil {
				t.Fatal(err)
			}
		}
		var logged bytes.Buffer
		me := NewStorageLocker("me", time.Minute, WithLog(zerolog.New(&logged)))

		write(now.Add(MaxTTL - time.Second))
		if _, err := me.Acquire(ctx, root); !errors.Is(err, ErrHeld) {
			t.Fatalf("a lock expiring within MaxTTL: %v, want ErrHeld", err)
		}
		write(now.AddDate(1, 0, 0))
		l, err := me.Acquire(ctx, root)
		if err != nil {
			t.Fatalf("a lock expiring a year from now: %v, want it taken over", err)
		}
		defer l.Release(ctx)
		if tok := l.Token(); !strings.HasPrefix(tok, "4.") {
			t.Errorf("token %s, want generation 4 after the takeover", tok)
		}
		if !strings.Contains(logged.String(), `"level":"warn"`) || !strings.Contains(logged.String(), "its holder's clock ran ahead") ||
			!strings.Contains(logged.String(), `"lock_id":"feedfacefeedface"`) {
			t.Errorf("log %s, want a warning naming the lock", logged.String())
		}
	})
}

// TestUnlockKV: a KV lease whose holder stopped renewing names its id and
// the unlock command; UnlockKV with another id removes nothing, with its id
// frees the root at once (without waiting for its TTL).
func TestUnlockKV(t *testing.T) {
	t.Parallel()
	env := newKVEnv(t)
	ctx := context.Background()
	root := Root{Key: "file:///srv/site/", Destination: "site"}
	hctx, cancel := context.WithCancel(ctx)
	if _, err := env.locker("serve dev on otherhost pid 7", time.Minute).Acquire(hctx, root); err != nil {
		t.Fatal(err)
	}
	cancel()
	h, err := ReadKV(ctx, env.kv, root.Key, time.Now())
	if err != nil || h == nil || h.Kind != KindKVLease || len(h.ID) != 16 || h.Holder != "serve dev on otherhost pid 7" || h.TTL != "1m0s" {
		t.Fatalf("ReadKV = %+v, %v", h, err)
	}
	_, err = env.locker("me", time.Minute).Acquire(ctx, root)
	if hint := "lease id " + h.ID + "; retry after it finishes (a dead holder's lease expires within 1m0s); if that holder is gone, break the lock with `distributor unlock --destination site --id " + h.ID + "`"; !errors.Is(err, ErrHeld) || !strings.HasSuffix(err.Error(), hint) {
		t.Fatalf("Acquire of the held root: %v\nwant ErrHeld ending in %q", err, hint)
	}
	if got, err := UnlockKV(ctx, env.kv, root.Key, "0123456789abcdef"); !errors.Is(err, ErrWrongID) || got == nil || got.ID != h.ID {
		t.Fatalf("UnlockKV with another id: %+v, %v; want ErrWrongID", got, err)
	}
	got, err := UnlockKV(ctx, env.kv, root.Key, h.ID)
	if err != nil || got == nil || *got != *h {
		t.Fatalf("UnlockKV: %+v, %v; want %+v removed", got, err, *h)
	}
	if got, err := UnlockKV(ctx, env.kv, root.Key, h.ID); got != nil || err != nil {
		t.Fatalf("UnlockKV of a free root: %+v, %v; want nothing", got, err)
	}
	l, err := env.locker("me", time.Minute).Acquire(ctx, root)
	if err != nil {
		t.Fatalf("Acquire after unlock: %v", err)
	}
	_ = l.Release(ctx)
}

// TestBothHaveOneID: the KV lease and the lock object that Both holds
// carry one id, so one unlock names both.
func TestBothHaveOneID(t *testing.T) {
	t.Parallel()
	env := newKVEnv(t)
	ctx := context.Background()
	dir := t.TempDir()
	b, err := local.New(dir)
	if err != nil {
		t.Fatal(err)
	}
	root := Root{Key: "file://" + dir + "/", Store: b}
	l, err := Both(env.locker("serve", time.Minute), NewStorageLocker("serve", time.Minute)).Acquire(ctx, root)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Release(ctx)
	kv, err := ReadKV(ctx, env.kv, root.Key, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	obj, err := ReadLock(ctx, b, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if kv == nil || obj == nil || kv.ID == "" || kv.ID != obj.ID {
		t.Fatalf("KV lease %+v and lock object %+v, want one id", kv, obj)
	}
}
