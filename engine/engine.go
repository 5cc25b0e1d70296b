// Package engine runs one publication on one destination root: recover,
// read the catalog, plan, write, delete, commit. The consumer and the
// direct-mode CLI both call it; planner decides, engine does the I/O.
package engine

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"mime"
	"path"
	"sort"
	"sync"
	"time"

	"github.com/rs/zerolog"
	"golang.org/x/sync/errgroup"

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
)

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
	Log     zerolog.Logger
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
}

// Result says what a publication did.
type Result struct {
	Root      string
	Plan      planner.Plan
	Written   []planner.Item // outputs whose bytes were written
	Updated   []planner.Item // records updated without a byte write
	Deleted   []string       // managed outputs (and legacy leftovers) deleted
	Unchanged int
	Recovered bool // an interrupted earlier run was rolled forward first
}

func (e *Engine) now() time.Time {
	now := time.Now
	if e.Now != nil {
		now = e.Now
	}
	return now().UTC().Truncate(time.Second)
}

// state is what a root holds before planning.
type state struct {
	cat     *catalog.Catalog // nil when absent or legacy
	legacy  bool
	version storage.Version
}

func readState(ctx context.Context, root storage.Backend) (state, error) {
	data, v, err := root.ReadVersion(ctx, catalog.FileName)
	if err != nil {
		return state{}, fmt.Errorf("read %s in %s: %w", catalog.FileName, root, err)
	}
	if v == "" {
		return state{}, nil
	}
	cat, legacy, err := catalog.Parse(data)
	if err != nil {
		return state{}, fmt.Errorf("%s in %s: %w", catalog.FileName, root, err)
	}
	return state{cat: cat, legacy: legacy, version: v}, nil
}

func listStored(ctx context.Context, root storage.Backend) (map[string]planner.Stored, error) {
	stored := map[string]planner.Stored{}
	err := root.List(ctx, "", func(o storage.ObjectInfo) error {
		if !catalog.IsReserved(o.Path) {
			stored[o.Path] = planner.Stored{Size: o.Size}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("list %s: %w", root, err)
	}
	return stored, nil
}

// Plan computes the publication's plan without changing anything.
func (e *Engine) Plan(ctx context.Context, root storage.Backend, pub Publication) (planner.Plan, error) {
	p, _, err := e.plan(ctx, root, pub)
	return p, err
}

func (e *Engine) plan(ctx context.Context, root storage.Backend, pub Publication) (planner.Plan, state, error) {
	st, err := readState(ctx, root)
	if err != nil {
		return planner.Plan{}, st, err
	}
	stored, err := listStored(ctx, root)
	if err != nil {
		return planner.Plan{}, st, err
	}
	desired := make([]planner.Desired, len(pub.Outputs))
	for i, o := range pub.Outputs {
		desired[i] = o.Desired
	}
	p, err := planner.Build(planner.Input{
		Owner: pub.Owner, Source: pub.Source, Workflow: pub.Workflow, Desired: desired,
		Catalog: st.cat, Legacy: st.legacy, Stored: stored, Now: e.now(),
		MaxDeletes: pub.MaxDeletes, TakeOwnership: pub.TakeOwnership, DistributorVersion: e.Version,
	})
	if err != nil {
		return p, st, fmt.Errorf("%s: %w", root, err)
	}
	return p, st, nil
}

// Publish runs the publication on root under l. See intent.go for the order
// of writes and why it survives a crash at any point.
func (e *Engine) Publish(ctx context.Context, root storage.Backend, l lease.Lease, pub Publication) (Result, error) {
	res := Result{Root: root.String()}
	rec, err := e.recover(ctx, root, l, true)
	if err != nil {
		return res, err
	}
	res.Recovered = rec.found
	// A retry of the same event reports what its interrupted run did, so
	// that downstream hears of those changes exactly once.
	sameEvent := rec.eventID != "" && rec.eventID == pub.BundleEventID
	if sameEvent {
		for _, o := range rec.written {
			res.Written = append(res.Written, planner.Item{Path: o.Path, Action: planner.Update, Write: true, Record: o})
		}
		res.Deleted = append(res.Deleted, rec.deleted...)
	}

	p, st, err := e.plan(ctx, root, pub)
	res.Plan = p
	if err != nil {
		return res, err
	}
	if p.Blocked() {
		return res, fmt.Errorf("%w in %s: %d planned path(s) blocked by content distributor does not manage (remove it, or adopt it with --take-ownership): %s", ErrCollision, root, len(p.Collisions), summarize(p.Collisions))
	}
	res.Unchanged = p.Count(planner.Unchanged)
	if sameEvent {
		// What the interrupted run wrote is reported as written above,
		// not as unchanged.
		for _, o := range rec.written {
			if it, ok := itemAt(p.Items, o.Path); ok && it.Action == planner.Unchanged {
				res.Unchanged--
			}
		}
	}
	if !p.Changed {
		return res, nil
	}

	writes, deletes := p.Writes(), p.Deletes()
	content := make(map[string][]byte)
	var copies []string
	for _, o := range pub.Outputs {
		if o.Content != nil {
			content[o.Path] = o.Content
		}
	}
	for _, it := range writes {
		if _, ok := content[it.Path]; !ok {
			copies = append(copies, it.Desired.From)
		}
	}
	if len(copies) > 0 {
		if pub.Bundle == nil {
			return res, errors.New("engine: publication copies files but has no bundle")
		}
		// A bundle file that is missing, or whose bytes are not the
		// manifest's, fails the publication before any byte is written
		// ("never a partial write"): sizes first (cheap), then the digest
		// of every file this plan copies — only those, so the cost still
		// follows the change. Writes hash again while streaming.
		if err := pub.Bundle.CheckSizes(ctx, copies); err != nil {
			return res, err
		}
		if err := e.verifyCopies(ctx, pub.Bundle, copies); err != nil {
			return res, err
		}
	}

	if len(writes)+len(deletes) > 0 {
		records := make([]catalog.Output, 0, len(writes))
		for _, it := range writes {
			records = append(records, it.Record)
		}
		if sameEvent {
			// Carry forward what earlier attempts of this event wrote, so
			// that whichever attempt finishes reports all of it.
			planned := make(map[string]bool, len(writes))
			for _, it := range writes {
				planned[it.Path] = true
			}
			for _, o := range rec.written {
				if !planned[o.Path] {
					records = append(records, o)
				}
			}
		}
		data, err := encodeIntent(pub.BundleEventID, records, deletes)
		if err != nil {
			return res, err
		}
		if err := l.Err(); err != nil {
			return res, err
		}
		if err := root.Put(ctx, IntentPath, bytes.NewReader(data), int64(len(data)), storage.PutOptions{ContentType: "application/json"}); err != nil {
			return res, fmt.Errorf("write intent in %s: %w", root, err)
		}
	}

	written, werr := e.writeAll(ctx, root, l, pub, writes, content)
	res.Written = append(res.Written, written...)
	if werr != nil {
		// Deletes are skipped; roll the landed writes forward so the catalog
		// describes them (and a retry does not collide with them).
		// The intent stays: a retry of this event reports these writes.
		if _, rerr := e.recover(context.WithoutCancel(ctx), root, l, false); rerr != nil {
			e.Log.Warn().Err(rerr).Str("root", root.String()).Msg("recovery after failed write did not finish; the next run completes it")
		}
		return res, werr
	}

	// Outputs are written with DeferSync: one flush makes them all durable
	// before the catalog that records them is committed.
	if err := storage.Sync(ctx, root); err != nil {
		return res, fmt.Errorf("sync %s: %w", root, err)
	}
	if len(deletes) > 0 {
		if err := l.Err(); err != nil {
			return res, err
		}
		if err := root.Delete(ctx, deletes...); err != nil {
			return res, fmt.Errorf("delete in %s: %w", root, err)
		}
		res.Deleted = append(res.Deleted, deletes...)
	}
	for _, it := range p.Items {
		if it.Action == planner.Update && !it.Write {
			res.Updated = append(res.Updated, it)
		}
	}
	if err := e.commit(ctx, root, l, p.Next, st.version); err != nil {
		return res, err
	}
	if len(writes)+len(deletes) > 0 {
		if err := root.Delete(ctx, IntentPath); err != nil {
			e.Log.Warn().Err(err).Str("root", root.String()).Msg("could not remove the intent; the next run removes it")
		}
	}
	return res, nil
}

func (e *Engine) commit(ctx context.Context, root storage.Backend, l lease.Lease, next *catalog.Catalog, version storage.Version) error {
	data, err := catalog.Marshal(next)
	if err != nil {
		return fmt.Errorf("engine: refusing to write an invalid catalog: %w", err)
	}
	if err := l.Err(); err != nil {
		return err
	}
	_, err = root.WriteIfVersion(ctx, catalog.FileName, data, version)
	if errors.Is(err, storage.ErrConflict) {
		return fmt.Errorf("%w: %s", ErrCatalogRace, root)
	}
	if err != nil {
		return fmt.Errorf("commit %s in %s: %w", catalog.FileName, root, err)
	}
	return nil
}

func (e *Engine) writeAll(ctx context.Context, root storage.Backend, l lease.Lease, pub Publication, writes []planner.Item, content map[string][]byte) ([]planner.Item, error) {
	workers := e.Workers
	if workers <= 0 {
		workers = 4
	}
	var (
		mu   sync.Mutex
		done []planner.Item
	)
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(workers)
	for _, it := range writes {
		if gctx.Err() != nil {
			break
		}
		g.Go(func() error {
			if err := l.Err(); err != nil {
				return err
			}
			if err := e.writeOne(gctx, root, pub, it, content[it.Path]); err != nil {
				return err
			}
			mu.Lock()
			done = append(done, it)
			mu.Unlock()
			return nil
		})
	}
	err := g.Wait()
	sort.Slice(done, func(i, j int) bool { return done[i].Path < done[j].Path })
	return done, err
}

// verifyCopies reads and hashes the bundle files to be copied.
func (e *Engine) verifyCopies(ctx context.Context, b *bundle.Bundle, paths []string) error {
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(max(e.Workers, 4))
	for _, p := range paths {
		g.Go(func() error {
			r, err := b.Open(gctx, p)
			if err != nil {
				return err
			}
			defer r.Close()
			_, err = io.Copy(io.Discard, r)
			return err
		})
	}
	return g.Wait()
}

func (e *Engine) writeOne(ctx context.Context, root storage.Backend, pub Publication, it planner.Item, data []byte) error {
	var r io.Reader
	if data != nil {
		r = bytes.NewReader(data)
	} else {
		rc, err := pub.Bundle.Open(ctx, it.Desired.From)
		if err != nil {
			return err
		}
		defer rc.Close()
		r = rc
	}
	opts := storage.PutOptions{SHA256: it.Desired.SHA256, ContentType: mime.TypeByExtension(path.Ext(it.Path)), DeferSync: true}
	if err := root.Put(ctx, it.Path, r, it.Desired.Size, opts); err != nil {
		return fmt.Errorf("write %s in %s: %w", it.Path, root, err)
	}
	return nil
}

// Recover rolls an interrupted publication's intent forward (see intent.go).
// It reports whether there was anything to recover.
func (e *Engine) Recover(ctx context.Context, root storage.Backend, l lease.Lease) (bool, error) {
	r, err := e.recover(ctx, root, l, true)
	return r.found, err
}

// recovery is what recover found and rolled forward.
type recovery struct {
	found   bool
	eventID string           // the interrupted run's bundle event
	written []catalog.Output // records rolled forward
	deleted []string         // records dropped because their bytes were gone
}

// recover is Recover. For an earlier run's leftovers (earlier) it logs at
// info level and removes the intent; after this run's own failed writes it
// logs at debug level and keeps the intent, so that the retry of the same
// event can report what landed.
func (e *Engine) recover(ctx context.Context, root storage.Backend, l lease.Lease, earlier bool) (recovery, error) {
	data, _, err := root.ReadVersion(ctx, IntentPath)
	if err != nil {
		return recovery{}, fmt.Errorf("read intent in %s: %w", root, err)
	}
	if data == nil {
		return recovery{}, nil
	}
	doc, err := decodeIntent(data)
	if err != nil {
		return recovery{}, fmt.Errorf("%s: %w", root, err)
	}
	writes, deletes := doc.Writes, doc.Deletes
	out := recovery{found: true, eventID: doc.EventID}
	st, err := readState(ctx, root)
	if err != nil {
		return recovery{}, err
	}
	if !st.legacy {
		cur := st.cat
		if cur == nil {
			cur = &catalog.Catalog{}
		}
		next := &catalog.Catalog{DistributorVersion: cur.DistributorVersion, CreatedAt: cur.CreatedAt, UpdatedAt: cur.UpdatedAt}
		index := cur.Index()
		changed := false
		for _, rec := range writes {
			ok, err := landed(ctx, root, rec)
			if err != nil {
				return recovery{}, fmt.Errorf("recover %s in %s: %w", rec.Path, root, err)
			}
			if !ok {
				continue
			}
			if old, managed := index[rec.Path]; managed && old.SameContent(rec) {
				out.written = append(out.written, old) // recorded by an earlier recovery
				continue
			} else if managed {
				rec.CreatedAt = old.CreatedAt
			}
			index[rec.Path] = rec
			changed = true
			out.written = append(out.written, rec)
		}
		for _, p := range deletes {
			if _, managed := index[p]; !managed {
				continue
			}
			if _, err := root.Stat(ctx, p); errors.Is(err, storage.ErrNotExist) {
				delete(index, p)
				changed = true
				out.deleted = append(out.deleted, p)
			} else if err != nil {
				return recovery{}, fmt.Errorf("recover %s in %s: %w", p, root, err)
			}
		}
		if changed {
			for _, o := range index {
				next.Outputs = append(next.Outputs, o)
			}
			now := e.now()
			if st.cat == nil {
				next.CreatedAt = now
			}
			next.UpdatedAt = now
			if e.Version != "" {
				next.DistributorVersion = e.Version
			}
			if err := storage.Sync(ctx, root); err != nil {
				return recovery{}, fmt.Errorf("sync %s: %w", root, err)
			}
			if err := e.commit(ctx, root, l, next, st.version); err != nil {
				return recovery{}, err
			}
		}
	}
	if !earlier {
		e.Log.Debug().Str("root", root.String()).Int("landed", len(out.written)).Msg("recorded the writes that landed before the failure")
		return out, nil
	}
	if err := l.Err(); err != nil {
		return recovery{}, err
	}
	if err := root.Delete(ctx, IntentPath); err != nil {
		return recovery{}, fmt.Errorf("remove intent in %s: %w", root, err)
	}
	ev := e.Log.Info()
	ev.Str("root", root.String()).Int("intended_writes", len(writes)).Int("intended_deletes", len(deletes)).Msg("recovered an interrupted publication")
	return out, nil
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
