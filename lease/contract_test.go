package lease_test

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/distributor/distributor/events"
	"github.com/distributor/distributor/lease"
	"github.com/distributor/distributor/lease/leasetest"
	"github.com/distributor/distributor/testenv"
)

// kvTokenLess orders KV tokens: decimal revisions of the bucket's stream.
func kvTokenLess(t *testing.T) func(a, b string) bool {
	return func(a, b string) bool {
		x, err1 := strconv.ParseUint(a, 10, 64)
		y, err2 := strconv.ParseUint(b, 10, 64)
		if err1 != nil || err2 != nil {
			t.Errorf("KV tokens %q, %q are not decimal revisions", a, b)
			return false
		}
		return x < y
	}
}

// lockTokenLess orders lock-object tokens ("generation.acquired-unix-nanos"):
// a fresh lock is acquired later than any earlier one, and a takeover
// raises the generation.
func lockTokenLess(t *testing.T) func(a, b string) bool {
	parse := func(s string) (gen, acquired int64) {
		g, n, ok := strings.Cut(s, ".")
		var err1, err2 error
		gen, err1 = strconv.ParseInt(g, 10, 64)
		acquired, err2 = strconv.ParseInt(n, 10, 64)
		if !ok || err1 != nil || err2 != nil {
			t.Errorf("lock token %q is not generation.nanoseconds", s)
		}
		return gen, acquired
	}
	return func(a, b string) bool {
		ga, na := parse(a)
		gb, nb := parse(b)
		return na < nb || (na == nb && ga < gb)
	}
}

func kvLockerFactory(t *testing.T) func(holder string, ttl time.Duration) lease.Locker {
	t.Helper()
	js := testenv.NewNATS(t).JetStream(t)
	st, err := events.Setup(context.Background(), js, events.SetupConfig{})
	if err != nil {
		t.Fatal(err)
	}
	return func(holder string, ttl time.Duration) lease.Locker { return lease.NewKV(js, st.Leases, holder, ttl) }
}

func storageLocker(holder string, ttl time.Duration) lease.Locker {
	return lease.NewStorageLocker(holder, ttl)
}

func TestKVLockerContract(t *testing.T) {
	t.Parallel()
	leasetest.Run(t, func(t *testing.T) leasetest.Env {
		return leasetest.Env{NewLocker: kvLockerFactory(t), Root: lease.Root{Key: "file:///contract/"}, TTL: time.Second, TokenLess: kvTokenLess(t)}
	})
}

func TestStorageLockerContract(t *testing.T) {
	t.Parallel()
	leasetest.Run(t, func(t *testing.T) leasetest.Env {
		return leasetest.Env{NewLocker: storageLocker, Root: localRoot(t), TTL: time.Second, TokenLess: lockTokenLess(t)}
	})
}

// Both and WithAdvisory over the KV lease and the lock object meet the
// same contract; their token is the KV lease's.
func TestCombinedLockersContract(t *testing.T) {
	t.Parallel()
	for name, combine := range map[string]func(first, second lease.Locker) lease.Locker{
		"Both":         lease.Both,
		"WithAdvisory": lease.WithAdvisory,
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			leasetest.Run(t, func(t *testing.T) leasetest.Env {
				kv := kvLockerFactory(t)
				return leasetest.Env{
					NewLocker: func(holder string, ttl time.Duration) lease.Locker {
						return combine(kv(holder, ttl), storageLocker(holder, ttl))
					},
					Root: localRoot(t), TTL: time.Second, TokenLess: kvTokenLess(t),
				}
			})
		})
	}
}
