package lease

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/distributor/distributor/events"
	"github.com/distributor/distributor/testenv"
)

// kvEnv is one embedded server with the production lease bucket.
type kvEnv struct {
	js jetstream.JetStream
	kv jetstream.KeyValue
}

func newKVEnv(t *testing.T) kvEnv {
	t.Helper()
	js := testenv.NewNATS(t).JetStream(t)
	st, err := events.Setup(context.Background(), js, events.SetupConfig{})
	if err != nil {
		t.Fatal(err)
	}
	return kvEnv{js: js, kv: st.Leases}
}

func (e kvEnv) locker(holder string, ttl time.Duration, opts ...KVOption) *KVLocker {
	return NewKV(e.js, e.kv, holder, ttl, opts...)
}

func token(t *testing.T, l Lease) uint64 {
	t.Helper()
	n, err := strconv.ParseUint(l.Token(), 10, 64)
	if err != nil {
		t.Fatalf("token %q is not a decimal revision: %v", l.Token(), err)
	}
	return n
}

func TestKVKey(t *testing.T) {
	t.Parallel()
	k := KVKey("s3://reports/weather/archive/")
	if len(k) != 64 || strings.Trim(k, "0123456789abcdef") != "" {
		t.Fatalf("KVKey = %q, want 64 lowercase hex digits", k)
	}
	if k != KVKey("s3://reports/weather/archive/") || k == KVKey("s3://reports/weather/latest/") {
		t.Fatal("KVKey is not a deterministic, distinct encoding")
	}
}

func TestKVRaceExactlyOneHolder(t *testing.T) {
	t.Parallel()
	env := newKVEnv(t)
	root := Root{Key: "file:///srv/reports/"}
	const n = 8
	var (
		wg     sync.WaitGroup
		leases = make([]Lease, n)
		errs   = make([]error, n)
	)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			leases[i], errs[i] = env.locker(fmt.Sprintf("holder-%d", i), 5*time.Second).Acquire(context.Background(), root)
		}()
	}
	wg.Wait()
	winner := -1
	for i := range n {
		if errs[i] == nil {
			if winner >= 0 {
				t.Fatalf("holders %d and %d both hold the lease", winner, i)
			}
			winner = i
		}
	}
	if winner < 0 {
		t.Fatalf("nobody got the lease: %v", errs)
	}
	defer leases[winner].Release(context.Background())
	want := fmt.Sprintf("file:///srv/reports/ is held by holder-%d since ", winner)
	for i, err := range errs {
		if i == winner {
			continue
		}
		if !errors.Is(err, ErrHeld) || !strings.Contains(err.Error(), want) {
			t.Errorf("holder %d: err = %v, want ErrHeld naming holder-%d", i, err, winner)
		}
	}
	if err := leases[winner].Err(); err != nil {
		t.Fatalf("winner's Err() = %v", err)
	}
}

func TestKVRenewalKeepsLeasePastTTL(t *testing.T) {
	t.Parallel()
	env := newKVEnv(t)
	ctx := context.Background()
	root := Root{Key: "s3://reports/weather/"}
	a, err := env.locker("a", time.Second).Acquire(ctx, root)
	if err != nil {
		t.Fatal(err)
	}
	// Renewals come every TTL/3: four of them are more than a TTL.
	testenv.Eventually(t, 10*time.Second, func() bool {
		e, err := env.kv.Get(ctx, KVKey(root.Key))
		return err == nil && e.Revision() >= token(t, a)+4
	}, "four renewals of the lease")
	if err := a.Err(); err != nil {
		t.Fatalf("renewed lease: Err() = %v after 4 renewals", err)
	}
	if _, err := env.locker("b", time.Second).Acquire(ctx, root); !errors.Is(err, ErrHeld) {
		t.Fatalf("b acquired a renewed lease: err = %v", err)
	}
	// Renewals are new revisions; the token stays the first one.
	e, err := env.kv.Get(ctx, KVKey(root.Key))
	if err != nil {
		t.Fatal(err)
	}
	if e.Revision() <= token(t, a) {
		t.Fatalf("key revision %d, token %s: no renewal happened", e.Revision(), a.Token())
	}
	if err := a.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if !errors.Is(a.Err(), ErrLost) {
		t.Fatalf("released lease: Err() = %v, want ErrLost", a.Err())
	}
	// Released: the next holder need not wait for the TTL.
	b, err := env.locker("b", time.Second).Acquire(ctx, root)
	if err != nil {
		t.Fatalf("acquire after release: %v", err)
	}
	if token(t, b) <= token(t, a) {
		t.Fatalf("token did not increase: a=%s b=%s", a.Token(), b.Token())
	}
	b.Release(ctx)
}

func TestKVStalledHolderLosesLease(t *testing.T) {
	t.Parallel()
	env := newKVEnv(t)
	ctx := context.Background()
	root := Root{Key: "file:///srv/stalled/"}

	// Three renewals go through, then the holder stalls (a GC pause, a
	// frozen VM). Renewing with kv.Update would drop the TTL and the key
	// would never expire: the renewals must keep it.
	stall := make(chan struct{})
	var (
		mu          sync.Mutex
		calls       int
		lastRenewal time.Time
	)
	stale := env.locker("stale", time.Second)
	stale.beforeRenew = func() {
		mu.Lock()
		calls++
		n := calls
		if n <= 3 {
			lastRenewal = time.Now()
		}
		mu.Unlock()
		if n > 3 {
			<-stall
		}
	}
	a, err := stale.Acquire(ctx, root)
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()

	var b Lease
	for b == nil {
		b, err = env.locker("fresh", time.Second).Acquire(ctx, root)
		if err != nil && !errors.Is(err, ErrHeld) {
			t.Fatal(err)
		}
		if time.Since(start) > 6*time.Second {
			t.Fatalf("stalled holder's lease did not expire: %v", err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	mu.Lock()
	took, renewals := time.Since(lastRenewal), calls
	mu.Unlock()
	t.Logf("second holder acquired %s after the stalled holder's last renewal", took)
	if renewals < 4 {
		t.Fatalf("only %d renewal attempts before the lease moved, want 3 renewals then a stall", renewals)
	}
	if took < 900*time.Millisecond {
		t.Fatalf("lease taken %s after the last renewal, before its 1s TTL", took)
	}
	defer b.Release(ctx)

	if err := a.Err(); !errors.Is(err, ErrLost) {
		t.Fatalf("stale holder: Err() = %v, want ErrLost", err)
	}
	if token(t, b) <= token(t, a) {
		t.Fatalf("token did not increase: stale=%s fresh=%s", a.Token(), b.Token())
	}

	close(stall) // the stale holder wakes up and tries to renew
	if err := a.Release(ctx); err != nil {
		t.Fatalf("releasing a lost lease: %v", err)
	}
	e, err := env.kv.Get(ctx, KVKey(root.Key))
	if err != nil {
		t.Fatalf("new holder's key after stale release: %v", err)
	}
	if !strings.Contains(string(e.Value()), `"holder":"fresh"`) {
		t.Fatalf("key holds %s, want the fresh holder", e.Value())
	}
	if err := b.Err(); err != nil {
		t.Fatalf("fresh holder: Err() = %v", err)
	}
	if _, err := env.locker("third", time.Second).Acquire(ctx, root); !errors.Is(err, ErrHeld) || !strings.Contains(err.Error(), "held by fresh") {
		t.Fatalf("third holder: err = %v, want ErrHeld by fresh", err)
	}
}

func TestKVTokensIncreaseAcrossHolders(t *testing.T) {
	t.Parallel()
	env := newKVEnv(t)
	ctx := context.Background()
	roots := []Root{{Key: "file:///a/"}, {Key: "file:///b/"}}
	var prev uint64
	for i := range 6 {
		l, err := env.locker(fmt.Sprintf("h%d", i), 2*time.Second).Acquire(ctx, roots[i%2])
		if err != nil {
			t.Fatal(err)
		}
		tok := token(t, l)
		if tok <= prev {
			t.Fatalf("holder %d token %d, previous %d", i, tok, prev)
		}
		prev = tok
		if err := l.Release(ctx); err != nil {
			t.Fatal(err)
		}
		if err := l.Release(ctx); err != nil {
			t.Fatalf("second release: %v", err)
		}
	}
}

func TestKVClockDeadline(t *testing.T) {
	t.Parallel()
	env := newKVEnv(t)
	ctx := context.Background()
	var mu sync.Mutex
	now := time.Date(2026, 6, 19, 12, 0, 0, 0, time.UTC)
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	// Renewal far in the future: only the clock decides.
	l, err := env.locker("a", 10*time.Second, WithKVClock(clock), WithKVRenewInterval(time.Hour)).Acquire(ctx, Root{Key: "file:///c/"})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Release(ctx)
	mu.Lock()
	now = now.Add(7499 * time.Millisecond)
	mu.Unlock()
	if err := l.Err(); err != nil {
		t.Fatalf("7.499s into a 10s lease: Err() = %v", err)
	}
	// The last quarter is the safety margin: a holder stops there.
	mu.Lock()
	now = now.Add(time.Millisecond)
	mu.Unlock()
	if err := l.Err(); !errors.Is(err, ErrLost) || !strings.Contains(err.Error(), "not renewed within 10s") {
		t.Fatalf("at the safety margin: Err() = %v, want ErrLost", err)
	}
}

func TestKVContextEndStopsRenewal(t *testing.T) {
	t.Parallel()
	env := newKVEnv(t)
	ctx, cancel := context.WithCancel(context.Background())
	root := Root{Key: "file:///d/"}
	a, err := env.locker("a", time.Second).Acquire(ctx, root)
	if err != nil {
		t.Fatal(err)
	}
	cancel()
	// Without renewals the holder gives the lease up by its own clock and
	// the server lets the key expire: wait for each, not for a fixed time.
	testenv.Eventually(t, 10*time.Second, func() bool { return errors.Is(a.Err(), ErrLost) }, "Err() to be ErrLost after ctx ended")
	var b Lease
	testenv.Eventually(t, 10*time.Second, func() bool {
		b, err = env.locker("b", time.Second).Acquire(context.Background(), root)
		return !errors.Is(err, ErrHeld)
	}, "the key to expire once renewal stopped")
	if err != nil {
		t.Fatalf("acquire after the first holder's ctx ended: %v", err)
	}
	b.Release(context.Background())
}

func TestKVTTLTooShort(t *testing.T) {
	t.Parallel()
	env := newKVEnv(t)
	_, err := env.locker("a", 500*time.Millisecond).Acquire(context.Background(), Root{Key: "file:///e/"})
	if err == nil || !strings.Contains(err.Error(), "below the 1s") {
		t.Fatalf("err = %v, want the TTL minimum", err)
	}
}

// TestKVRaceOnReplicatedBucket: on an R3 bucket (a 3-node cluster) a
// released root's key is a delete marker, and racing holders that all see
// it must still end with one holder and the others refused with ErrHeld.
// The server reports their lost compare-and-swap as 10164, not 10071.
func TestKVRaceOnReplicatedBucket(t *testing.T) {
	// Not parallel: the cluster gets the CPU while it elects its leaders.
	cl := testenv.NewCluster(t)
	js := cl.JetStream(t)
	// Retried: a fresh cluster on a busy machine may still be settling.
	var st *events.Streams
	testenv.Retry(t, time.Minute, func() (err error) {
		st, err = events.Setup(context.Background(), js, events.SetupConfig{Replicas: 3})
		return err
	}, "setting up the R3 streams")
	env := kvEnv{js: js, kv: st.Leases}
	ctx := context.Background()
	root := Root{Key: "file:///srv/reports/"}
	for round := range 5 {
		// Released: the key holds a delete marker when the race starts.
		// Retried while the bucket's stream may still lack a leader; one
		// locker, so a create whose answer was lost is its own to take over.
		locker := env.locker("first", 5*time.Second)
		var first Lease
		testenv.Retry(t, time.Minute, func() (err error) {
			first, err = locker.Acquire(ctx, root)
			return err
		}, "round %d: acquiring the lease before the race", round)
		if err := first.Release(ctx); err != nil {
			t.Fatal(err)
		}
		// Every replica holds the marker before the race: a read answered
		// by a replica still behind would show "first" as the holder and
		// refuse everyone (safe, but not the race this test is about).
		cl.WaitStreamCurrent(t, "KV_"+st.Leases.Bucket())
		const n = 8
		var leases []Lease
		var errs []error
		for try := 0; ; try++ {
			leases, errs = raceForLease(ctx, env, root, n)
			// Everyone refused, "first" named as the holder: a replica
			// still answered from before the release (safe; not the race
			// this test is about). Raced again once every replica is
			// current, a few times at most.
			if try < 3 && allHeldBy(errs, "first") {
				t.Logf("round %d: a replica behind the release answered; racing again", round)
				cl.WaitStreamCurrent(t, "KV_"+st.Leases.Bucket())
				continue
			}
			break
		}
		winner := -1
		for i := range n {
			switch {
			case errs[i] == nil && winner >= 0:
				t.Fatalf("round %d: holders %d and %d both hold the lease", round, winner, i)
			case errs[i] == nil:
				winner = i
			case !errors.Is(errs[i], ErrHeld):
				t.Errorf("round %d: holder %d: err = %v, want ErrHeld", round, i, errs[i])
			}
		}
		if winner < 0 {
			t.Fatalf("round %d: nobody got the lease: %v", round, errs)
		}
		if err := leases[winner].Release(ctx); err != nil {
			t.Fatal(err)
		}
		cl.WaitStreamCurrent(t, "KV_"+st.Leases.Bucket())
	}
}

// raceForLease has n holders acquire root at once.
func raceForLease(ctx context.Context, env kvEnv, root Root, n int) ([]Lease, []error) {
	var wg sync.WaitGroup
	leases, errs := make([]Lease, n), make([]error, n)
	for i := range n {
		wg.Go(func() {
			leases[i], errs[i] = env.locker(fmt.Sprintf("holder-%d", i), 5*time.Second).Acquire(ctx, root)
		})
	}
	wg.Wait()
	return leases, errs
}

// allHeldBy reports whether every error refuses the lease as held by
// holder.
func allHeldBy(errs []error, holder string) bool {
	for _, err := range errs {
		if !errors.Is(err, ErrHeld) || !strings.Contains(err.Error(), "held by "+holder+" ") {
			return false
		}
	}
	return true
}

// requests counts the messages the locker's connection sends while fn runs.
func requests(t *testing.T, js jetstream.JetStream, fn func()) uint64 {
	t.Helper()
	before := js.Conn().Stats().OutMsgs
	fn()
	return js.Conn().Stats().OutMsgs - before
}

// A holder that takes the same root again and again (serve publishing one
// root's bundles) creates the key over its own release marker in one
// request, not three; the lease it gets is a new one (a larger token).
func TestKVReacquireAfterOwnReleaseIsOneRequest(t *testing.T) {
	t.Parallel()
	env := newKVEnv(t)
	ctx := context.Background()
	root := Root{Key: "file:///srv/reports/"}
	l := env.locker("h", 2*time.Second)
	first, err := l.Acquire(ctx, root)
	if err != nil {
		t.Fatal(err)
	}
	if err := first.Release(ctx); err != nil {
		t.Fatal(err)
	}
	var again Lease
	if n := requests(t, env.js, func() { again, err = l.Acquire(ctx, root) }); err != nil || n != 1 {
		t.Fatalf("re-acquire sent %d messages (err %v), want 1", n, err)
	}
	defer again.Release(ctx)
	if token(t, again) <= token(t, first) {
		t.Fatalf("token %s after %s", again.Token(), first.Token())
	}
	if _, err := env.locker("other", 2*time.Second).Acquire(ctx, root); !errors.Is(err, ErrHeld) {
		t.Fatalf("another holder while re-acquired: %v, want ErrHeld", err)
	}
}

// When another holder took the root after this locker's release (and
// released it, or let it expire), the shortcut's compare-and-swap fails and
// the ordinary create decides: the lease is taken, with a larger token.
func TestKVReacquireAfterAnotherHolderFallsBack(t *testing.T) {
	t.Parallel()
	for _, expire := range []bool{false, true} {
		t.Run(fmt.Sprintf("expired=%v", expire), func(t *testing.T) {
			t.Parallel()
			env := newKVEnv(t)
			ctx := context.Background()
			root := Root{Key: "file:///srv/reports/"}
			l, other := env.locker("h", 2*time.Second), env.locker("other", time.Second)
			mine, err := l.Acquire(ctx, root)
			if err != nil {
				t.Fatal(err)
			}
			if err := mine.Release(ctx); err != nil {
				t.Fatal(err)
			}
			octx, stop := context.WithCancel(ctx)
			theirs, err := other.Acquire(octx, root)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := l.Acquire(ctx, root); !errors.Is(err, ErrHeld) {
				t.Fatalf("acquire while another holds it: %v, want ErrHeld", err)
			}
			if expire {
				stop() // renewal ends; the key's TTL runs out
			} else if err := theirs.Release(ctx); err != nil {
				t.Fatal(err)
			}
			defer stop()
			var again Lease
			testenv.Eventually(t, 10*time.Second, func() bool {
				again, err = l.Acquire(ctx, root)
				return !errors.Is(err, ErrHeld)
			}, "the other holder's lease to end")
			if err != nil {
				t.Fatal(err)
			}
			defer again.Release(ctx)
			if token(t, again) <= token(t, theirs) {
				t.Fatalf("token %s after the other holder's %s", again.Token(), theirs.Token())
			}
		})
	}
}

// lostAnswers is a bucket whose first creates land on the server while
// their answer never reaches the client (a create that timed out under
// load), and whose reads may fail for a while.
type lostAnswers struct {
	jetstream.KeyValue
	mu          sync.Mutex
	loseCreates int // creates that land but report a timeout
	failGets    int // reads that fail before reaching the server
}

func (k *lostAnswers) Create(ctx context.Context, key string, value []byte, opts ...jetstream.KVCreateOpt) (uint64, error) {
	rev, err := k.KeyValue.Create(ctx, key, value, opts...)
	k.mu.Lock()
	defer k.mu.Unlock()
	if err == nil && k.loseCreates > 0 {
		k.loseCreates--
		return 0, fmt.Errorf("create %s: %w", key, context.DeadlineExceeded)
	}
	return rev, err
}

func (k *lostAnswers) Get(ctx context.Context, key string) (jetstream.KeyValueEntry, error) {
	k.mu.Lock()
	fail := k.failGets > 0
	if fail {
		k.failGets--
	}
	k.mu.Unlock()
	if fail {
		return nil, fmt.Errorf("get %s: %w", key, nats.ErrTimeout)
	}
	return k.KeyValue.Get(ctx, key)
}

// lostReleases is a JetStream context whose next releases (delete
// markers) never reach the server and time out.
type lostReleases struct {
	jetstream.JetStream
	lose atomic.Int32
}

func (j *lostReleases) PublishMsg(ctx context.Context, m *nats.Msg, opts ...jetstream.PublishOpt) (*jetstream.PubAck, error) {
	if m.Header.Get("KV-Operation") == "DEL" && j.lose.Add(-1) >= 0 {
		return nil, fmt.Errorf("publish %s: %w", m.Subject, nats.ErrTimeout)
	}
	return j.JetStream.PublishMsg(ctx, m, opts...)
}

// wantHolds checks that l holds root for exactly this lease: the key's
// revision is its token, another holder of the same name (another
// process, or another locker of this one) is refused, and after the
// release another holder gets it at once.
func wantHolds(t *testing.T, env kvEnv, l Lease, root Root, holder string) {
	t.Helper()
	ctx := context.Background()
	e, err := env.kv.Get(ctx, KVKey(root.Key))
	if err != nil {
		t.Fatal(err)
	}
	if e.Revision() != token(t, l) {
		t.Errorf("the key is at revision %d, the lease's token is %s", e.Revision(), l.Token())
	}
	if _, err := env.locker(holder, 5*time.Second).Acquire(ctx, root); !errors.Is(err, ErrHeld) {
		t.Fatalf("another locker of the same holder name: %v, want ErrHeld", err)
	}
	if err := l.Release(ctx); err != nil {
		t.Fatal(err)
	}
	other, err := env.locker("other", 5*time.Second).Acquire(ctx, root)
	if err != nil {
		t.Fatalf("acquire after the release: %v", err)
	}
	_ = other.Release(ctx)
}

// A lease create that timed out on the client while it succeeded on the
// server is taken over by its holder: read back at once, or by the next
// Acquire when the read fails too. A process never finds its own unused
// lease "held by another live holder" and waits for its TTL.
func TestKVCreateWhoseAnswerWasLostIsTakenOver(t *testing.T) {
	t.Parallel()
	const holder = "serve v1 on host pid 42"
	root := Root{Key: "file:///srv/reports/"}
	ctx := context.Background()

	t.Run("read back", func(t *testing.T) {
		t.Parallel()
		env := newKVEnv(t)
		kv := &lostAnswers{KeyValue: env.kv, loseCreates: 1}
		l, err := NewKV(env.js, kv, holder, 5*time.Second).Acquire(ctx, root)
		if err != nil {
			t.Fatalf("acquire whose create answer was lost: %v", err)
		}
		wantHolds(t, env, l, root, holder)
	})
	t.Run("next acquire", func(t *testing.T) {
		t.Parallel()
		env := newKVEnv(t)
		kv := &lostAnswers{KeyValue: env.kv, loseCreates: 1, failGets: 1}
		locker := NewKV(env.js, kv, holder, 30*time.Second)
		if _, err := locker.Acquire(ctx, root); err == nil || errors.Is(err, ErrHeld) {
			t.Fatalf("acquire whose create answer and read back were lost: %v, want the timeout", err)
		}
		start := time.Now()
		l, err := locker.Acquire(ctx, root)
		if err != nil {
			t.Fatalf("the next acquire: %v, want the landed lease taken over", err)
		}
		if took := time.Since(start); took > 5*time.Second {
			t.Errorf("the next acquire took %v", took)
		}
		wantHolds(t, env, l, root, holder)
	})
}

// A release that timed out leaves the key with the released lease's
// record; the same locker's next Acquire takes it over at once.
func TestKVReleaseThatTimedOutIsTakenOver(t *testing.T) {
	t.Parallel()
	const holder = "serve v1 on host pid 42"
	env := newKVEnv(t)
	ctx := context.Background()
	root := Root{Key: "file:///srv/reports/"}
	js := &lostReleases{JetStream: env.js}
	locker := NewKV(js, env.kv, holder, 30*time.Second)
	first, err := locker.Acquire(ctx, root)
	if err != nil {
		t.Fatal(err)
	}
	js.lose.Store(1)
	if err := first.Release(ctx); err == nil {
		t.Fatal("a release that timed out reported no error")
	}
	again, err := locker.Acquire(ctx, root)
	if err != nil {
		t.Fatalf("acquire after a release that timed out: %v, want the unused lease taken over", err)
	}
	if token(t, again) <= token(t, first) {
		t.Errorf("token %s after %s", again.Token(), first.Token())
	}
	wantHolds(t, env, again, root, holder)
}

// cancelledCreates is a bucket whose next create lands and then cancels
// the caller's context, as a caller that gives up while the create is on
// its way sees it.
type cancelledCreates struct {
	jetstream.KeyValue
	cancel context.CancelFunc
}

func (k *cancelledCreates) Create(ctx context.Context, key string, value []byte, opts ...jetstream.KVCreateOpt) (uint64, error) {
	if _, err := k.KeyValue.Create(context.Background(), key, value, opts...); err != nil {
		return 0, err
	}
	k.cancel()
	return 0, fmt.Errorf("create %s: %w", key, context.Canceled)
}

// A create that landed after its caller gave up is removed in the
// background: another process gets the root at once, not after the TTL.
func TestKVCreateLandedAfterTheCallerGaveUpIsRemoved(t *testing.T) {
	t.Parallel()
	env := newKVEnv(t)
	root := Root{Key: "file:///srv/reports/"}
	ctx, cancel := context.WithCancel(context.Background())
	kv := &cancelledCreates{KeyValue: env.kv, cancel: cancel}
	if _, err := NewKV(env.js, kv, "serve v1 on host pid 42", 30*time.Second).Acquire(ctx, root); err == nil {
		t.Fatal("an acquire whose caller gave up reported a lease")
	}
	start := time.Now()
	other := NewKV(env.js, env.kv, "serve v1 on other pid 7", 30*time.Second)
	for {
		l, err := other.Acquire(context.Background(), root)
		if err == nil {
			wantHolds(t, env, l, root, "serve v1 on other pid 7")
			break
		}
		if !errors.Is(err, ErrHeld) || time.Since(start) > 10*time.Second {
			t.Fatalf("another process after %v: %v, want the root free well before the 30 s TTL", time.Since(start), err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
