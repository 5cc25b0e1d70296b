package engine

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/rs/zerolog"

	"github.com/distributor/distributor/bundle"
	"github.com/distributor/distributor/catalog"
	"github.com/distributor/distributor/lease"
	"github.com/distributor/distributor/planner"
	"github.com/distributor/distributor/storage"
)

var (
	// ErrCollision: desired paths exist as unmanaged content; nothing was written.
	ErrCollision = errors.New("collision with unmanaged content")

	// ErrCatalogRace: the catalog changed between read and commit.
	ErrCatalogRace = errors.New("catalog changed during the publication (lost compare-and-swap)")

	// ErrSuperseded: a replacement's owner already holds a newer version
	// of the same source; nothing was written (an additive publication
	// keeps the newer version's paths instead and is not refused). Errors
	// wrapping it are *SupersededError.
	ErrSuperseded = errors.New("superseded")
)

// SupersededError is a publication refused because the destination already
// holds a newer version of the same source (see planner.Newer).
type SupersededError struct {
	Root   string
	Owner  catalog.Owner
	Source catalog.Source // the publication's (older) version
	By     catalog.Source // the version that stays
}

func (e *SupersededError) Error() string {
	return fmt.Sprintf("%s: %s in %s already has %s created %s (digest %s), newer than this bundle's created %s (digest %s); nothing changed",
		ErrSuperseded, e.Owner, e.Root, e.By.ID, catalog.FormatTime(e.By.Created), e.By.Digest,
		catalog.FormatTime(e.Source.Created), e.Source.Digest)
}

// Is makes errors.Is(err, ErrSuperseded) hold.
func (e *SupersededError) Is(target error) bool { return target == ErrSuperseded }

// epoch stands in for required times in documents that have none.
var epoch = time.Unix(0, 0).UTC()

// Engine executes plans against storage.
type Engine struct {
	// Now is the clock; times are truncated to seconds for the catalog.
	Now func() time.Time

	// Version is written into catalogs as distributor_version.
	Version string

	// Workers bounds concurrent object writes (default 4).
	Workers int

	// LeftoverAge is how long a temp file or unfinished upload must be
	// untouched before it is removed as an interrupted write's leftover
	// (default DefaultLeftoverAge; see Leftovers in the package doc).
	LeftoverAge time.Duration
	Log         zerolog.Logger

	// WholeCatalog is the size (bytes) up to which a publication parses
	// the root's catalog whole as soon as it is read, plans with all of
	// it and writes the next one whole; a larger one is read as a stream,
	// of which the plan holds only what it selects (planner.Select). 0:
	// catalog.HoldMax; negative: every catalog is streamed.
	WholeCatalog int64
}

func (e *Engine) wholeCatalog() int64 {
	if e.WholeCatalog == 0 {
		return catalog.HoldMax
	}
	return e.WholeCatalog
}

// Output is one desired output and where its bytes come from.
type Output struct {
	planner.Desired

	// Content holds a generated output's bytes; nil means "copy Desired.From
	// from the bundle".
	Content []byte
}

// Publication is one bundle going to one destination root.
type Publication struct {
	Owner         catalog.Owner
	Workflow      planner.Workflow
	Source        catalog.Source
	BundleEventID string
	Outputs       []Output
	Bundle        *bundle.Bundle
	MaxDeletes    int
	TakeOwnership bool
	AllowOlder    bool

	// DeleteLater, with AllowOlder on an additive root, also deletes the
	// owner's paths that only newer versions of the source wrote
	// (planner.Input.DeleteLater).
	DeleteLater bool

	// PublishLast are the destination's publish_last globs: the writes
	// are made visible in groups (GroupOf), in order.
	PublishLast []string

	// RetainPrevious keeps the paths a replacement publication drops in
	// storage, retired, for this long (0: deleted at once).
	RetainPrevious time.Duration

	// ReadAhead, when set, is the root's catalog already being read
	// (Engine.ReadAhead); Publish takes it over.
	ReadAhead *ReadAhead
}

// Result says what a publication did.
type Result struct {
	Root      string
	Plan      planner.Plan
	Written   []planner.Item // outputs whose bytes were written
	Updated   []planner.Item // records updated without a byte write
	Deleted   []string       // managed outputs (and legacy leftovers) deleted
	Unchanged int

	// KeptNewer counts the planned paths an older additive publication
	// left to the newer version of its source that wrote them.
	KeptNewer int
	Recovered bool // an interrupted earlier run was rolled forward first

	// LeaseToken is the fencing token of the root's lease, once it was
	// held (by the service).
	LeaseToken string

	// Kept is the encoded result an earlier attempt of this publication
	// finished with and could not deliver (Engine.KeepResult); when set,
	// this run changed nothing and the rest of Result is empty.
	Kept []byte
}

func (e *Engine) now() time.Time {
	now := time.Now
	if e.Now != nil {
		now = e.Now
	}
	return now().UTC().Truncate(time.Second)
}

// Publish runs the publication on root under l: the engine's one door.
// See intent.go for the order of writes and why it survives a crash at
// any point.
func (e *Engine) Publish(ctx context.Context, root storage.Backend, l lease.Lease, pub Publication) (Result, error) {
	var spent string
	res, err := e.run(ctx, root, l, pub, &spent)

	// A successful result reports what earlier attempts changed: their
	// pending report is spent, as is a superseded one's. A failed attempt
	// leaves it for the next.
	var superseded *SupersededError
	if spent != "" && (err == nil || errors.As(err, &superseded)) {
		if derr := root.Delete(context.WithoutCancel(ctx), spent); derr != nil {
			e.Log.Debug().Err(derr).Msg("could not remove a spent pending report")
		}
	}
	return res, err
}

// commit writes the catalog that follows st after a plan whose Next is
// next (state.nextDocument) as the root's catalog if the catalog is still
// at st's version (a compare-and-swap) and the lease holds: confirmed
// with the lease's store before the swap (lease.Lease.Confirm), so a
// holder whose lease was broken or taken while it was paused commits
// nothing, its recovery's commits included.
func (e *Engine) commit(ctx context.Context, root storage.Backend, l lease.Lease, st state, next *catalog.Catalog) error {
	pc := root.PrepareCatalog(ctx, st.nextDocument(ctx, next), 0)
	defer pc.Close()
	return commitPending(ctx, root, l, confirming(ctx, l), pc, st.version)
}

// confirming starts l.Confirm in the background and returns its wait: a
// publication confirms while it writes, off its critical path. What the
// fence needs is a confirmation after the catalog that the commit swaps
// against was read: then a newer holder took the root after that read,
// and any commit of its makes this one's swap fail. Earlier than that
// read (a recovery reads the catalog a newer holder committed) it proves
// nothing.
func confirming(ctx context.Context, l lease.Lease) (wait func() error) {
	done := make(chan error, 1)
	go func() { done <- l.Confirm(ctx) }()
	return sync.OnceValue(func() error { return <-done })
}

// commitPending commits a catalog PrepareCatalog began, as commit does,
// once confirmed (confirming l) says the lease holds and l still does.
func commitPending(ctx context.Context, root storage.Backend, l lease.Lease, confirmed func() error, pc storage.PendingCatalog, version storage.Version) error {
	if err := confirmed(); err != nil {
		return err
	}
	if err := l.Err(); err != nil {
		return err
	}
	_, err := pc.Commit(ctx, version)
	switch {
	case errors.Is(err, catalog.ErrInvalid):
		return fmt.Errorf("engine: refusing to write an invalid catalog: %w", err)
	case errors.Is(err, storage.ErrConflict):
		// Often how a holder paused past its lease meets a newer one:
		// then the lost lease is what it reports.
		if cerr := l.Confirm(context.WithoutCancel(ctx)); errors.Is(cerr, lease.ErrLost) {
			return fmt.Errorf("%w (%w: %s)", cerr, ErrCatalogRace, root)
		}
		return fmt.Errorf("%w: %s", ErrCatalogRace, root)
	case err != nil:
		return fmt.Errorf("commit %s in %s: %w", catalog.FileName, root, err)
	}
	return nil
}

// Recover rolls an interrupted publication's intent forward (see Crash
// consistency in the package doc).
// It reports whether there was anything to recover.
func (e *Engine) Recover(ctx context.Context, root storage.Backend, l lease.Lease) (bool, error) {
	r, err := e.recover(ctx, root, l, true)
	return r.found, err
}

// without returns paths minus those in drop (both sorted).
func without(paths, drop []string) []string {
	if len(drop) == 0 {
		return paths
	}
	var out []string
	for _, p := range paths {
		if _, found := sort.Find(len(drop), func(i int) int { return strings.Compare(p, drop[i]) }); !found {
			out = append(out, p)
		}
	}
	return out
}

// collisionError explains a blocked plan. Content in the way of a file or
// folder cannot be adopted, so only plain collisions suggest
// --take-ownership.
func collisionError(root storage.Backend, p planner.Plan) error {
	var taken, tree, way []string
	for _, it := range p.Items {
		switch {
		case it.Action != planner.Collision:
		case len(it.InTheWay) > 0:
			tree = append(tree, it.Path)
			way = append(way, it.InTheWay...)
		default:
			taken = append(taken, it.Path)
		}
	}
	var parts []string
	if len(taken) > 0 {
		parts = append(parts, fmt.Sprintf("%d planned path(s) blocked by content distributor does not manage (remove it, or adopt it with --take-ownership): %s", len(taken), summarize(taken)))
	}
	if len(tree) > 0 {
		slices.Sort(way)
		parts = append(parts, fmt.Sprintf("%d planned path(s) need a file or folder where content distributor does not manage is in the way (remove the unmanaged content in the way; it cannot be adopted across file and folder): %s, in the way: %s", len(tree), summarize(tree), summarize(slices.Compact(way))))
	}
	return fmt.Errorf("%w in %s: %s", ErrCollision, root, strings.Join(parts, "; "))
}

// itemAt finds the plan item at path (items are sorted by path).
func itemAt(items []planner.Item, path string) (planner.Item, bool) {
	i := sort.Search(len(items), func(i int) bool { return items[i].Path >= path })
	if i < len(items) && items[i].Path == path {
		return items[i], true
	}
	return planner.Item{}, false
}

func summarize(paths []string) string {
	const max = 5
	if len(paths) <= max {
		return fmt.Sprintf("%q", paths)
	}
	return fmt.Sprintf("%q and %d more", paths[:max], len(paths)-max)
}
