package lease

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strconv"
	"sync"
	"time"

	"github.com/rs/zerolog"

	"github.com/distributor/distributor/internal/process"
	"github.com/distributor/distributor/storage"
)

// LockPath is the direct-mode lock object inside a root.
const LockPath = ".distributor/lock"

// lockRecord is the lock object's content.
type lockRecord struct {
	// ID names this acquisition for `distributor unlock` (kept across
	// renewals; a takeover writes a new one).
	ID       string    `json:"id,omitempty"`
	Holder   string    `json:"holder"`
	Host     string    `json:"host"`
	PID      int       `json:"pid"`
	Acquired time.Time `json:"acquired"`
	Expires  time.Time `json:"expires"`

	// TTL is the holder's lease TTL: each renewal sets Expires to the
	// renewal's time plus TTL, so Expires-TTL is the last renewal. Absent
	// in locks of an older distributor.
	TTL string `json:"ttl,omitempty"`

	// Generation increases with every takeover of an expired lock; with
	// Acquired it forms the fencing token.
	Generation int64 `json:"generation"`
}

// StorageLocker is the direct-mode Locker: a lock object in the root created
// with a conditional write, carrying holder and expiry, renewed while held.
// A lock whose expiry passed, or whose holder process on this same host is
// gone, is taken over with a compare-and-swap on its version, so a crashed
// run never leaves a root stuck. The lock object is written without a
// flush (storage.DeferSync): a crash of the
// machine, which ends every holder, may lose it or leave it torn, and an
// unreadable lock is taken over at once (one contender wins the swap).
type StorageLocker struct {
	holder string
	ttl    time.Duration
	now    func() time.Time
	host   string
	pid    int
	alive  func(pid int) bool
	log    zerolog.Logger
}

// LockOption configures a StorageLocker.
type LockOption func(*StorageLocker)

// WithClock replaces time.Now (tests).
func WithClock(now func() time.Time) LockOption { return func(l *StorageLocker) { l.now = now } }

// WithLog sets the logger that warns of a lock taken over because its
// expiry lay beyond MaxTTL (default: none).
func WithLog(log zerolog.Logger) LockOption { return func(l *StorageLocker) { l.log = log } }

// WithProcess sets the host and pid recorded in the lock (tests).
func WithProcess(host string, pid int, alive func(int) bool) LockOption {
	return func(l *StorageLocker) { l.host, l.pid, l.alive = host, pid, alive }
}

// NewStorageLocker returns a direct-mode locker. ttl bounds how long a crashed
// holder on another host blocks the root.
func NewStorageLocker(holder string, ttl time.Duration, opts ...LockOption) *StorageLocker {
	host, _ := os.Hostname()
	l := &StorageLocker{holder: holder, ttl: ttl, now: time.Now, host: host, pid: os.Getpid(), alive: process.Alive, log: zerolog.Nop()}
	for _, o := range opts {
		o(l)
	}
	return l
}

// Acquire implements Locker.
func (l *StorageLocker) Acquire(ctx context.Context, root Root) (Lease, error) {
	rec := lockRecord{ID: idFor(ctx), Holder: l.holder, Host: l.host, PID: l.pid, Generation: 1, TTL: l.ttl.String()}
	rec.Acquired = l.now().UTC()
	rec.Expires = rec.Acquired.Add(l.ttl)
	data, _ := json.Marshal(rec)
	v, err := writeLock(ctx, root.Store, data, "")
	if errors.Is(err, storage.ErrConflict) {
		v, rec, err = l.takeOver(ctx, root, rec)
	}
	if err != nil {
		return nil, err
	}
	ls := &storageLease{locker: l, root: root, rec: rec, version: v, done: make(chan struct{})}
	ls.wg.Add(1)
	go ls.renew(ctx)
	return ls, nil
}

func (l *StorageLocker) takeOver(ctx context.Context, root Root, rec lockRecord) (storage.Version, lockRecord, error) {
	data, v, err := root.Store.ReadVersion(ctx, LockPath)
	if err != nil {
		return "", rec, fmt.Errorf("read lock %s/%s: %w", root.Store, LockPath, err)
	}
	if v == "" { // released between our write and read: try once more
		data, _ := json.Marshal(rec)
		nv, err := writeLock(ctx, root.Store, data, "")
		if errors.Is(err, storage.ErrConflict) {
			return "", rec, fmt.Errorf("%w: %s (lock changed while acquiring)", ErrHeld, root.Key)
		}
		return nv, rec, err
	}
	var cur lockRecord
	if err := json.Unmarshal(data, &cur); err == nil {
		now := l.now()
		dead := cur.Host == l.host && cur.PID > 0 && !l.alive(cur.PID)

		// No lease is ever given more than MaxTTL (or this locker's own
		// TTL, in tests): an expiry beyond it comes from a clock that ran
		// ahead and would block the root until that clock's time.
		longest := max(MaxTTL, l.ttl)
		ahead := cur.Expires.After(now.Add(longest))
		if now.Before(cur.Expires) && !dead && !ahead {
			if ttl, err := time.ParseDuration(cur.TTL); err == nil && stoppedRenewing(cur.Expires.Add(-ttl), ttl, now) {
				return "", rec, &stoppedHolderError{fmt.Sprintf("%s is locked by %s (pid %d on %s), which stopped renewing at %s; the lock expires at %s%s",
					root.Store, cur.Holder, cur.PID, cur.Host, cur.Expires.Add(-ttl).Format(time.RFC3339), cur.Expires.Format(time.RFC3339), unlockNow(root, cur.ID))}
			}
			return "", rec, fmt.Errorf("%w: %s is locked by %s (pid %d on %s) until %s, lock id %s%s", ErrHeld, root.Store, cur.Holder, cur.PID, cur.Host,
				cur.Expires.Format(time.RFC3339), orNone(cur.ID), unlockHint(root, cur.ID))
		}
		if ahead && !dead {
			l.log.Warn().Str("root", root.Key).Str("holder", cur.Holder).Str("host", cur.Host).Int("pid", cur.PID).Str("lock_id", cur.ID).
				Time("expires", cur.Expires).Dur("max_ttl", longest).
				Msg("taking over a lock whose expiry lies beyond the longest lease distributor gives: its holder's clock ran ahead")
		}
		rec.Generation = cur.Generation + 1
	}

	// Otherwise the lock is unreadable. Every version of it is written
	// whole (temp file + rename, or an atomic object write), so a torn
	// one is what a crash of the machine left of an unsynced write: its
	// holder died with the machine. Its generation is lost; Acquired
	// (later than the dead holder's) still orders the tokens.
	nd, _ := json.Marshal(rec)
	nv, err := writeLock(ctx, root.Store, nd, v)
	if errors.Is(err, storage.ErrConflict) {
		return "", rec, fmt.Errorf("%w: %s (another run took the expired lock first)", ErrHeld, root.Store)
	}
	return nv, rec, err
}

// writeLock writes the lock object with a compare-and-swap, without a
// flush (storage.DeferSync): a lock need not
// survive a crash of the machine, which ends its holder too. Losing it
// then frees the root; an older or torn version is taken over (takeOver).
func writeLock(ctx context.Context, st storage.Backend, data []byte, want storage.Version) (storage.Version, error) {
	return st.WriteIfVersion(ctx, LockPath, data, want, storage.DeferSync)
}

// deleteLock removes the lock object if it is still version want, without
// a flush.
func deleteLock(ctx context.Context, st storage.Backend, want storage.Version) error {
	return st.DeleteIfVersion(ctx, LockPath, want, storage.DeferSync)
}

type storageLease struct {
	locker *StorageLocker
	root   Root

	mu      sync.Mutex
	rec     lockRecord
	version storage.Version
	lost    error

	// renewErr is why the last renewal failed, for the loss message.
	renewErr error

	once sync.Once
	done chan struct{}
	wg   sync.WaitGroup
}

func (s *storageLease) Token() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return strconv.FormatInt(s.rec.Generation, 10) + "." + strconv.FormatInt(s.rec.Acquired.UnixNano(), 10)
}

func (s *storageLease) Err() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.lost == nil && !s.locker.now().Before(s.rec.Expires.Add(-SafetyMargin(s.locker.ttl))) {
		why := ""
		if s.renewErr != nil {
			why = fmt.Sprintf("; the last renewal failed: %v", s.renewErr)
		}
		s.lost = fmt.Errorf("%w: lock on %s expires at %s and was not renewed (a holder stops %s before expiry so that its last write cannot land after it)%s",
			ErrLost, s.root.Store, s.rec.Expires.Format(time.RFC3339), SafetyMargin(s.locker.ttl), why)
	}
	return s.lost
}

// renew keeps the lock until Release or until ctx (the Acquire context)
// ends, as Locker promises: a run whose context ended stops renewing, and Err
// reports the loss once the expiry nears.
func (s *storageLease) renew(ctx context.Context) {
	defer s.wg.Done()
	t := time.NewTicker(s.locker.ttl / 3)
	defer t.Stop()
	for {
		select {
		case <-s.done:
			return
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if s.Err() != nil {
			return
		}
		s.mu.Lock()
		rec := s.rec
		v := s.version
		s.mu.Unlock()
		rec.Expires = s.locker.now().UTC().Add(s.locker.ttl)
		data, _ := json.Marshal(rec)

		// Bounded: a hung backend must not hold renewal (or Release) beyond
		// the next tick; Err reports the loss once the expiry nears.
		wctx, cancel := context.WithTimeout(ctx, s.locker.ttl/3)
		nv, err := writeLock(wctx, s.root.Store, data, v)
		if errors.Is(err, storage.ErrConflict) {
			// A renewal that timed out may still have landed: then the
			// lock is ours with a newer version, not taken over.
			nv, rec, err = s.checkOwner(wctx, rec)
		}
		cancel()
		s.mu.Lock()
		switch {
		case err == nil:
			s.rec, s.version, s.renewErr = rec, nv, nil
		case errors.Is(err, ErrTakenOver):
			s.lost = err
		default:
			// Transient: keep trying until the expiry nears.
			s.renewErr = err
		}
		s.mu.Unlock()
	}
}

// checkOwner reads the lock after a failed renewal. If it still carries this
// holder's record, an earlier renewal landed although its answer was lost:
// the lock and its version are adopted (with the expiry it recorded, which
// is no later than this renewal's). Otherwise the lock really was taken
// over (or removed): ErrTakenOver.
func (s *storageLease) checkOwner(ctx context.Context, mine lockRecord) (storage.Version, lockRecord, error) {
	data, v, err := s.root.Store.ReadVersion(ctx, LockPath)
	if err != nil {
		return "", mine, fmt.Errorf("read lock %s%s after a failed renewal: %w", s.root.Store, LockPath, err)
	}
	if v == "" {
		return "", mine, fmt.Errorf("%w: lock on %s was removed by someone else: %w", ErrLost, s.root.Store, ErrTakenOver)
	}
	var cur lockRecord
	if json.Unmarshal(data, &cur) == nil && sameAcquisition(cur, mine) {
		return v, cur, nil
	}
	return "", mine, fmt.Errorf("%w: lock on %s was taken over by %s (pid %d on %s): %w", ErrLost, s.root.Store, cur.Holder, cur.PID, cur.Host, ErrTakenOver)
}

// sameAcquisition reports whether cur is mine, renewed or not: the same
// id, holder process, generation and acquisition time.
func sameAcquisition(cur, mine lockRecord) bool {
	return cur.ID == mine.ID && cur.Holder == mine.Holder && cur.Host == mine.Host && cur.PID == mine.PID &&
		cur.Generation == mine.Generation && cur.Acquired.Equal(mine.Acquired)
}

// Confirm reads the lock object and compares it with this acquisition
// (see Lease.Confirm); a renewal in flight does not matter, as a renewed
// lock carries the same acquisition.
func (s *storageLease) Confirm(ctx context.Context) error {
	if err := s.Err(); err != nil {
		return err
	}
	s.mu.Lock()
	mine := s.rec
	s.mu.Unlock()
	data, v, err := s.root.Store.ReadVersion(ctx, LockPath)
	if err != nil {
		return fmt.Errorf("confirm the lock on %s before committing: %w", s.root.Store, err)
	}
	var lost error
	var cur lockRecord
	switch {
	case v == "":
		lost = fmt.Errorf("%w: the lock on %s was removed (broken with `distributor unlock`?) while this run held it: %w", ErrLost, s.root.Store, ErrTakenOver)
	case json.Unmarshal(data, &cur) != nil:
		lost = fmt.Errorf("%w: the lock on %s is unreadable, no longer this run's: %w", ErrLost, s.root.Store, ErrTakenOver)
	case !sameAcquisition(cur, mine):
		lost = fmt.Errorf("%w: the lock on %s is held by %s (pid %d on %s, lock id %s), not this run (lock id %s): %w",
			ErrLost, s.root.Store, cur.Holder, cur.PID, cur.Host, orNone(cur.ID), orNone(mine.ID), ErrTakenOver)
	default:
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.lost == nil {
		s.lost = lost
	}
	return s.lost
}

func (s *storageLease) Release(ctx context.Context) error {
	s.once.Do(func() { close(s.done) })
	s.wg.Wait()
	s.mu.Lock()
	v, lost := s.version, s.lost
	s.mu.Unlock()
	if lost != nil {
		return nil
	}
	err := deleteLock(ctx, s.root.Store, v)
	if errors.Is(err, storage.ErrConflict) || errors.Is(err, storage.ErrNotExist) {
		return nil // someone took it over after it expired: not ours to delete
	}
	return err
}

// orNone is id, or "none" for a lock an older distributor wrote.
func orNone(id string) string {
	if id == "" {
		return "none"
	}
	return id
}
