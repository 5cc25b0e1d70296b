package lease

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// minKVTTL is the smallest per-message TTL NATS accepts.
const minKVTTL = time.Second

// KVLocker is the serve-mode Locker: one key per destination root in a
// JetStream key-value bucket (events.Setup creates it with LimitMarkerTTL,
// which per-key TTLs need; NATS 2.11 or newer). A lease is a key created
// with a TTL and renewed every ttl/3; a holder that stops renewing loses it
// when the TTL runs out and the next Create succeeds. The key's first
// revision is the fencing token: revisions are the bucket stream's
// sequence, so they grow across all keys and are never reused.
type KVLocker struct {
	js       jetstream.JetStream
	kv       jetstream.KeyValue
	holder   string
	ttl      time.Duration
	interval time.Duration
	now      func() time.Time

	// beforeRenew runs before each renewal attempt (tests stall renewal here).
	beforeRenew func()

	// id is unique to this locker (random); each attempt's record carries
	// it with a number of its own (kvRecord.Attempt), so that the locker knows
	// its own records from those of another holder with the same name.
	id       string
	attempts atomic.Uint64

	// released maps a key to the revision of the delete marker this
	// locker's last release of it wrote. Re-acquiring such a key is then
	// one compare-and-swap on that revision, where kv.Create over a
	// delete marker takes three requests (a failed create, a read of the
	// marker, the create). Bounded by the number of roots.
	mu       sync.Mutex
	released map[string]uint64

	// orphans maps a key to the attempt of a lease of this locker that
	// no one uses and that may still be in the bucket: a create whose
	// answer never came (it may have landed), a release that failed. A
	// later Acquire that finds that record takes it over instead of
	// waiting for its TTL. Bounded by the number of roots.
	orphans map[string]string
}

// KVOption configures a KVLocker.
type KVOption func(*KVLocker)

// WithKVClock replaces time.Now for lease deadlines (tests).
func WithKVClock(now func() time.Time) KVOption { return func(l *KVLocker) { l.now = now } }

// WithKVRenewInterval sets how often a held lease is renewed (default ttl/3).
func WithKVRenewInterval(d time.Duration) KVOption { return func(l *KVLocker) { l.interval = d } }

// NewKV returns a locker on the bucket kv. js is the JetStream context kv was
// opened with: renewals publish to the bucket's subject directly, because
// kv.Update would drop the key's TTL. holder names this process in the
// error another holder sees ("host/pid"); ttl (at least 1 s) bounds how
// long a crashed holder blocks a root.
func NewKV(js jetstream.JetStream, kv jetstream.KeyValue, holder string, ttl time.Duration, opts ...KVOption) *KVLocker {
	var rnd [8]byte
	_, _ = rand.Read(rnd[:]) // never fails (crypto/rand)
	l := &KVLocker{js: js, kv: kv, holder: holder, ttl: ttl, interval: ttl / 3, now: time.Now,
		id: hex.EncodeToString(rnd[:]), released: map[string]uint64{}, orphans: map[string]string{}}
	for _, o := range opts {
		o(l)
	}
	return l
}

// KVKey is the bucket key of a root: the lowercase hex SHA-256 of root.Key.
// Root keys are URLs that KV keys cannot hold; a digest always fits.
func KVKey(rootKey string) string {
	sum := sha256.Sum256([]byte(rootKey))
	return hex.EncodeToString(sum[:])
}

// kvRecord is the key's value: who holds the root, for the ErrHeld message.
type kvRecord struct {
	// ID names this acquisition for `distributor unlock`.
	ID     string `json:"id,omitempty"`
	Holder string `json:"holder"`

	// Attempt names the attempt that wrote the record: the locker's
	// random id and a number (see KVLocker.orphans).
	Attempt  string    `json:"attempt,omitempty"`
	Root     string    `json:"root"`
	Acquired time.Time `json:"acquired"`
	Renewed  time.Time `json:"renewed,omitzero"`
	TTL      string    `json:"ttl"`
}

// Acquire implements Locker. The lease is renewed until Release or ctx ends.
func (l *KVLocker) Acquire(ctx context.Context, root Root) (Lease, error) {
	if l.ttl < minKVTTL {
		return nil, fmt.Errorf("lease ttl %s is below the 1s NATS allows: raise the lease ttl", l.ttl)
	}
	key := KVKey(root.Key)

	// A few tries: the key may expire or be released between our Create
	// and our read of its holder.
	for range 3 {
		rec, sent := l.record(ctx, root)
		data, _ := json.Marshal(rec)
		rev, err := l.create(ctx, key, data)
		if err == nil {
			return l.start(ctx, root, key, rec, rev, sent), nil
		}

		// A Create over a delete marker (a released lease) that loses the
		// race to another holder fails with a raw wrong-last-sequence
		// error, which on replicated buckets (10164) is not ErrKeyExists.
		if !errors.Is(err, jetstream.ErrKeyExists) && !wrongLastSequence(err) {
			// No answer is no proof that nothing landed: a create that
			// timed out on the client may have succeeded on the server.
			l.orphan(key, rec.Attempt)
			if ctx.Err() == nil {
				if ls, ok := l.adoptLanded(ctx, root, key, rec.Attempt); ok {
					return ls, nil
				}
			} else {
				// The caller gave up with the create on its way: if it
				// landed, nobody will use it, and other processes would
				// find the root held until the TTL.
				go l.dropLanded(key, rec.Attempt)
			}
			return nil, fmt.Errorf("acquire lease on %s in bucket %s: %w", root.Key, l.kv.Bucket(), err)
		}
		e, err := l.kv.Get(ctx, key)
		if errors.Is(err, jetstream.ErrKeyNotFound) || errors.Is(err, jetstream.ErrKeyDeleted) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("%w: %s (cannot read the holder: %v)", ErrHeld, root.Key, err)
		}
		var cur kvRecord
		if json.Unmarshal(e.Value(), &cur) != nil || cur.Holder == "" {
			cur.Holder = "an unknown holder"
		}
		if l.isOrphan(key, cur.Attempt) {
			ls, err := l.adopt(ctx, root, key, e.Revision())
			if err == nil {
				return ls, nil
			}
			if wrongLastSequence(err) {
				continue // it expired, or someone else adopted or took it
			}
			return nil, fmt.Errorf("acquire lease on %s in bucket %s: take over this process's unused lease: %w", root.Key, l.kv.Bucket(), err)
		}
		if ttl, err := time.ParseDuration(cur.TTL); err == nil && stoppedRenewing(e.Created(), ttl, l.now()) {
			return nil, &stoppedHolderError{fmt.Sprintf("%s is held by %s, which stopped renewing at %s (lease id %s); the lease expires at %s%s",
				root.Key, cur.Holder, e.Created().UTC().Format(time.RFC3339), orNone(cur.ID), e.Created().Add(ttl).UTC().Format(time.RFC3339), unlockNow(root, cur.ID))}
		}
		return nil, fmt.Errorf("%w: %s is held by %s since %s, lease id %s; retry after it finishes (a dead holder's lease expires within %s)%s",
			ErrHeld, root.Key, cur.Holder, cur.Acquired.Format(time.RFC3339), orNone(cur.ID), cur.TTL, unlockHint(root, cur.ID))
	}
	return nil, fmt.Errorf("%w: %s (it changed hands while acquiring)", ErrHeld, root.Key)
}

// record is a new attempt's record, and when it is sent.
func (l *KVLocker) record(ctx context.Context, root Root) (kvRecord, time.Time) {
	sent := l.now()
	attempt := l.id + "-" + strconv.FormatUint(l.attempts.Add(1), 10)
	return kvRecord{ID: idFor(ctx), Holder: l.holder, Attempt: attempt, Root: root.Key, Acquired: sent.UTC(), TTL: l.ttl.String()}, sent
}

// start returns the lease whose record rec landed at revision rev, sent at
// sent, and starts its renewal.
func (l *KVLocker) start(ctx context.Context, root Root, key string, rec kvRecord, rev uint64, sent time.Time) *kvLease {
	ls := &kvLease{
		locker: l, root: root, key: key, rec: rec, token: rev, rev: rev,
		deadline: sent.Add(l.ttl), stop: make(chan struct{}), done: make(chan struct{}),
	}
	l.mu.Lock()
	delete(l.orphans, key) // the key holds this record now, no other of ours
	l.mu.Unlock()
	go ls.renew(ctx)
	return ls
}

// orphan remembers that key may hold this locker's record of attempt,
// unused.
func (l *KVLocker) orphan(key, attempt string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.orphans[key] = attempt
}

// isOrphan reports whether attempt wrote key's unused record of this
// locker.
func (l *KVLocker) isOrphan(key, attempt string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return attempt != "" && l.orphans[key] == attempt
}

// adoptLanded reads key after a create that got no answer: when the
// create landed (the key holds its attempt), the lease is taken over
// at once rather than found "held" by this very process later.
func (l *KVLocker) adoptLanded(ctx context.Context, root Root, key, attempt string) (Lease, bool) {
	gctx, cancel := context.WithTimeout(ctx, l.ttl/3)
	defer cancel()
	e, err := l.kv.Get(gctx, key)
	if err != nil {
		return nil, false
	}
	var cur kvRecord
	if json.Unmarshal(e.Value(), &cur) != nil || cur.Attempt != attempt {
		return nil, false
	}
	ls, err := l.adopt(gctx, root, key, e.Revision())
	return ls, err == nil
}

// dropLanded removes key's record of attempt, if it landed and is still
// there, with a compare-and-swap on its revision: a record this locker
// took over or another holder wrote since is left alone.
func (l *KVLocker) dropLanded(key, attempt string) {
	ctx, cancel := context.WithTimeout(context.Background(), l.ttl/3)
	defer cancel()
	e, err := l.kv.Get(ctx, key)
	if err != nil {
		return
	}
	var cur kvRecord
	if json.Unmarshal(e.Value(), &cur) != nil || cur.Attempt != attempt {
		return
	}
	if l.kv.Delete(ctx, key, jetstream.LastRevision(e.Revision())) == nil {
		l.mu.Lock()
		if l.orphans[key] == attempt {
			delete(l.orphans, key)
		}
		l.mu.Unlock()
	}
}

// adopt takes over this locker's unused record at revision rev with a new
// record: a compare-and-swap on rev that also restarts the key's TTL. The
// token is the new revision, larger than any earlier holder's.
func (l *KVLocker) adopt(ctx context.Context, root Root, key string, rev uint64) (Lease, error) {
	rec, sent := l.record(ctx, root)
	data, _ := json.Marshal(rec)
	ack, err := l.js.PublishMsg(ctx, &nats.Msg{Subject: l.subject(key), Data: data},
		jetstream.WithExpectLastSequencePerSubject(rev), jetstream.WithMsgTTL(l.ttl))
	if err != nil {
		if !wrongLastSequence(err) {
			l.orphan(key, rec.Attempt) // this write may have landed too
		}
		return nil, err
	}
	return l.start(ctx, root, key, rec, ack.Sequence, sent), nil
}

// subject is the bucket subject of key (renewals and releases publish to
// it directly).
func (l *KVLocker) subject(key string) string { return "$KV." + l.kv.Bucket() + "." + key }

// create creates key. When this locker's own release wrote the key's last
// revision, a compare-and-swap on that revision creates it in one request:
// it succeeds only if nothing (another holder, an expiry marker) came
// since, exactly the state in which kv.Create would read that marker and
// create over it. Otherwise kv.Create decides.
func (l *KVLocker) create(ctx context.Context, key string, data []byte) (uint64, error) {
	l.mu.Lock()
	marker, ok := l.released[key]
	delete(l.released, key)
	l.mu.Unlock()
	if ok {
		ack, err := l.js.PublishMsg(ctx, &nats.Msg{Subject: l.subject(key), Data: data},
			jetstream.WithExpectLastSequencePerSubject(marker), jetstream.WithMsgTTL(l.ttl))
		if err == nil {
			return ack.Sequence, nil
		}
		if !wrongLastSequence(err) {
			return 0, err
		}
	}
	return l.kv.Create(ctx, key, data, jetstream.KeyTTL(l.ttl))
}

type kvLease struct {
	locker *KVLocker
	root   Root
	key    string
	rec    kvRecord
	token  uint64

	// renewing is held by each renewal (renewOnce), the background ones
	// and Confirm's.
	renewing sync.Mutex

	mu       sync.Mutex
	rev      uint64    // current revision: the next renewal's compare-and-swap
	deadline time.Time // the lease is ours until then (local clock)
	lost     error
	renewErr error // why the last renewal failed, for the loss message

	once sync.Once
	stop chan struct{}
	done chan struct{}
}

// Token is the key's first revision in decimal; compare tokens as numbers.
func (s *kvLease) Token() string { return strconv.FormatUint(s.token, 10) }

func (s *kvLease) Err() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.errLocked()
}

func (s *kvLease) errLocked() error {
	if s.lost == nil && !s.locker.now().Before(s.deadline.Add(-SafetyMargin(s.locker.ttl))) {
		why := ""
		if s.renewErr != nil {
			why = fmt.Sprintf("; the last renewal failed: %v", s.renewErr)
		}
		s.lost = fmt.Errorf("%w: lease on %s was not renewed within %s (a holder stops %s before expiry so that its last write cannot land after it)%s",
			ErrLost, s.root.Key, s.locker.ttl, SafetyMargin(s.locker.ttl), why)
	}
	return s.lost
}

func (s *kvLease) renew(ctx context.Context) {
	defer close(s.done)
	t := time.NewTicker(s.locker.interval)
	defer t.Stop()
	for {
		select {
		case <-s.stop:
			return
		case <-ctx.Done():
			return // Err reports the loss once the deadline passes
		case <-t.C:
		}
		if s.locker.beforeRenew != nil {
			s.locker.beforeRenew()
		}
		if errors.Is(s.renewOnce(ctx), ErrLost) {
			return
		}
	}
}

// renewOnce renews the lease with a compare-and-swap on its revision and
// records the outcome: a new revision and deadline, the loss, or (a
// transient failure) why it failed. One renewal at a time (renewing): a
// swap of this lease's never races another of its own.
func (s *kvLease) renewOnce(ctx context.Context) error {
	s.renewing.Lock()
	defer s.renewing.Unlock()
	s.mu.Lock()
	err := s.errLocked()
	rev, deadline := s.rev, s.deadline
	s.mu.Unlock()
	if err != nil {
		return err
	}

	sent := s.locker.now()
	rec := s.rec
	rec.Renewed = sent.UTC()
	data, _ := json.Marshal(rec)

	// A renewal later than the deadline is worthless.
	pctx, cancel := context.WithTimeout(ctx, deadline.Sub(sent))
	ack, err := s.locker.js.PublishMsg(pctx, &nats.Msg{Subject: s.locker.subject(s.key), Data: data},
		jetstream.WithExpectLastSequencePerSubject(rev), jetstream.WithMsgTTL(s.locker.ttl))
	cancel()

	var owned jetstream.KeyValueEntry
	if wrongLastSequence(err) {
		// A renewal whose answer was lost may have landed: then the
		// key is still ours at a newer revision.
		owned, err = s.checkOwner(ctx, deadline.Sub(sent))
	}

	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case err == nil && owned != nil:
		s.rev, s.renewErr = owned.Revision(), nil // keep the older deadline
	case err == nil:
		s.rev, s.deadline, s.renewErr = ack.Sequence, sent.Add(s.locker.ttl), nil
	case errors.Is(err, ErrLost):
		if s.lost == nil {
			s.lost = err
		}
		return s.lost
	default:
		// Transient: retry on the next tick until the deadline passes.
		s.renewErr = err
	}
	return err
}

// Confirm renews the lease at once (see Lease.Confirm): a compare-and-swap
// on the revision this holder last wrote, which the bucket's leader
// decides, so no replica's late copy of the key can vouch for a lease
// that another holder took or an operator removed.
func (s *kvLease) Confirm(ctx context.Context) error {
	if err := s.renewOnce(ctx); err != nil && !errors.Is(err, ErrLost) {
		return fmt.Errorf("confirm the lease on %s before committing: %w", s.root.Key, err)
	} else if err != nil {
		return err
	}
	return nil
}

// checkOwner reads the key after a failed compare-and-swap: this holder's
// record at another revision is a renewal that landed; a missing key is an
// expired lease (ErrLost); another holder's record is ErrLost and
// ErrTakenOver.
func (s *kvLease) checkOwner(ctx context.Context, timeout time.Duration) (jetstream.KeyValueEntry, error) {
	gctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	e, err := s.locker.kv.Get(gctx, s.key)
	if errors.Is(err, jetstream.ErrKeyNotFound) || errors.Is(err, jetstream.ErrKeyDeleted) {
		return nil, fmt.Errorf("%w: lease on %s expired or was removed (broken with `distributor unlock`?)", ErrLost, s.root.Key)
	}
	if err != nil {
		return nil, fmt.Errorf("read lease on %s after a failed renewal: %w", s.root.Key, err)
	}
	var cur kvRecord
	if json.Unmarshal(e.Value(), &cur) == nil && cur.Holder == s.rec.Holder && cur.Attempt == s.rec.Attempt && cur.Acquired.Equal(s.rec.Acquired) {
		return e, nil
	}
	if cur.Holder == "" {
		cur.Holder = "an unknown holder"
	}
	return nil, fmt.Errorf("%w: lease on %s was taken over by %s: %w", ErrLost, s.root.Key, cur.Holder, ErrTakenOver)
}

// Release stops renewal and deletes the key if it is still this lease's
// revision; a key another holder has since created is left alone.
func (s *kvLease) Release(ctx context.Context) error {
	s.once.Do(func() { close(s.stop) })
	<-s.done
	s.mu.Lock()
	rev, lost := s.rev, s.errLocked()
	if s.lost == nil {
		s.lost = fmt.Errorf("%w: lease on %s was released", ErrLost, s.root.Key)
	}
	s.mu.Unlock()

	// kv.Delete's marker, published here for its revision (see released).
	m := nats.NewMsg(s.locker.subject(s.key))
	m.Header.Set("KV-Operation", "DEL")
	ack, err := s.locker.js.PublishMsg(ctx, m, jetstream.WithExpectLastSequencePerSubject(rev))
	switch {
	case err == nil:
		s.locker.mu.Lock()
		s.locker.released[s.key] = ack.Sequence
		s.locker.mu.Unlock()
		return nil
	case wrongLastSequence(err):
		return nil // no longer ours
	}

	// The key may still hold this lease's record: this locker's next
	// Acquire of the root takes it over instead of waiting for its TTL.
	s.locker.orphan(s.key, s.rec.Attempt)
	if lost != nil {
		return nil // a lost lease has nothing left to give up
	}
	return fmt.Errorf("release lease on %s: %w", s.root.Key, err)
}

// wrongLastSequence reports a failed compare-and-swap on the key: it expired
// or another holder has it (10071; 10164 on replicated buckets).
func wrongLastSequence(err error) bool {
	var apiErr *jetstream.APIError
	return errors.As(err, &apiErr) && (apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequence ||
		apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequenceConstant)
}
