package lease

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/distributor/distributor/events"
	"github.com/distributor/distributor/storage/local"
	"github.com/distributor/distributor/testenv"
)

func advisoryRoot(t *testing.T) Root {
	t.Helper()
	dir := t.TempDir()
	b, err := local.New(dir)
	if err != nil {
		t.Fatal(err)
	}
	return Root{Key: "file://" + dir + "/", Store: b}
}

// The KV lease of a direct-mode run is advisory: NATS going away does not
// lose the run's lease (the lock object fences it), another holder taking
// the key does.
func TestAdvisoryLeaseSurvivesNATSButNotTakeover(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	n := testenv.NewNATS(t)
	js := n.JetStream(t)
	st, err := events.Setup(ctx, js, events.SetupConfig{})
	if err != nil {
		t.Fatal(err)
	}
	const ttl = time.Second

	// Another holder takes the key (here: after it was deleted under us).
	root := advisoryRoot(t)
	l, err := WithAdvisory(NewKV(js, st.Leases, "direct", ttl), NewStorageLocker("direct", time.Minute)).Acquire(ctx, root)
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Leases.Delete(ctx, KVKey(root.Key)); err != nil {
		t.Fatal(err)
	}
	other, err := NewKV(js, st.Leases, "serve-2", ttl).Acquire(ctx, root)
	if err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 5*time.Second, func() bool { return l.Err() != nil }, "the advisory lease to see the takeover")
	if err := l.Err(); !errors.Is(err, ErrTakenOver) || !strings.Contains(err.Error(), "was taken over by serve-2") {
		t.Fatalf("advisory key taken by another holder: Err() = %v, want ErrTakenOver naming serve-2", err)
	}
	_ = l.Release(ctx)
	if err := other.Release(ctx); err != nil {
		t.Fatal(err)
	}

	// NATS goes away: the KV lease runs out, the run's lease holds.
	root = advisoryRoot(t)
	kv := NewKV(js, st.Leases, "direct", ttl)
	l, err = WithAdvisory(kv, NewStorageLocker("direct", time.Minute)).Acquire(ctx, root)
	if err != nil {
		t.Fatal(err)
	}
	n.Server.Shutdown()
	// The KV lease runs out on its own clock (renewals cannot land).
	kvLease := l.(advisoryLease).advisory
	testenv.Eventually(t, 3*ttl, func() bool { return kvLease.Err() != nil }, "the KV lease to run out with NATS gone")
	if err := l.(advisoryLease).advisory.Err(); !errors.Is(err, ErrLost) || errors.Is(err, ErrTakenOver) {
		t.Fatalf("KV lease with NATS gone: Err() = %v, want ErrLost, not taken over", err)
	}
	if err := l.Err(); err != nil {
		t.Fatalf("advisory lease with NATS gone: Err() = %v, want nil (the lock object still fences the root)", err)
	}
	if _, err := NewStorageLocker("other", time.Minute).Acquire(ctx, root); !errors.Is(err, ErrHeld) {
		t.Fatalf("lock-only run while the advisory lease is held: %v, want ErrHeld", err)
	}
	start := time.Now()
	if err := l.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d > advisoryReleaseTimeout+time.Second {
		t.Fatalf("Release with NATS gone took %v", d)
	}
	if _, v, err := root.Store.ReadVersion(ctx, LockPath); err != nil || v != "" {
		t.Fatalf("lock object after Release: version %q, %v; want removed", v, err)
	}
}
