// Package stores opens the storage backends that a configuration and bundle
// locations name: local folders and S3 prefixes. S3 clients are shared per
// (region, endpoint, path style).
package stores

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"sync"
	"time"

	"github.com/distributor/distributor/bundle"
	"github.com/distributor/distributor/config"
	"github.com/distributor/distributor/storage"
	"github.com/distributor/distributor/storage/local"
	"github.com/distributor/distributor/storage/s3"
)

// Opener opens backends for destinations and bundle locations.
type Opener struct {
	// S3 holds the defaults for bundle locations on S3.
	S3 config.S3Defaults

	// Warn, when set, is told of storage trouble as it happens: an S3
	// request that hit one of its time or rate limits, or a catalog held
	// in memory for want of a temporary file (the caller logs it; ctx is
	// the request's or the publication's). Set it before opening anything.
	Warn func(ctx context.Context, err error)

	mu    sync.Mutex
	cache map[string]storage.Backend

	// syncs lets the local roots share their syncfs barriers (group commit).
	syncs *local.SyncGroup

	// budget is the upload memory of every S3 backend it opens, together.
	budget *s3.Budget
}

// New returns an Opener using cfg's S3 defaults.
func New(cfg *config.Config) *Opener {
	o := &Opener{syncs: local.NewSyncGroup(), budget: s3.NewBudget(0)}
	if cfg != nil {
		o.S3 = cfg.S3
	}
	return o
}

// S3Budget is the upload memory budget that every S3 backend this Opener
// opens shares (64 MiB for buffers, 16 MiB for staged small objects): the
// bound holds for all workers and destinations of the process together.
func (o *Opener) S3Budget() *s3.Budget { return o.budget }

// Destination opens a destination's root.
func (o *Opener) Destination(ctx context.Context, d config.Destination) (storage.Backend, error) {
	switch d.Backend {
	case "local":
		return o.cached(ctx, d.RootKey(), func() (storage.Backend, error) { return local.New(d.Path, local.WithSyncGroup(o.syncs)) })
	case "s3":
		opts := s3.Options{Bucket: d.Bucket, Prefix: d.Path, Region: d.Region, Endpoint: d.Endpoint, PathStyle: d.PathStyle, Budget: o.budget}
		o.withTimeouts(&opts, d.Timeouts)
		return o.cached(ctx, d.RootKey(), func() (storage.Backend, error) { return s3.New(ctx, opts) })
	}
	return nil, fmt.Errorf("destination %q: unknown backend %q: use local or s3", d.ID, d.Backend)
}

// Bundle opens a bundle location (absolute path, file:// or s3:// URL).
func (o *Opener) Bundle(ctx context.Context, location string) (storage.Backend, error) {
	loc, err := bundle.ParseLocation(location)
	if err != nil {
		return nil, err
	}
	switch loc.Scheme {
	case "file":
		if _, err := os.Stat(loc.Path); errors.Is(err, fs.ErrNotExist) {
			// Named as missing (not a local.New failure) so that consumers
			// report bundle_missing, never a retryable fault.
			return nil, missingBundle(loc.Path)
		}
		b, err := local.New(loc.Path)
		if errors.Is(err, storage.ErrRootMissing) {
			// Not a folder (or gone since the check): a missing bundle,
			// never a missing destination root.
			return nil, missingBundle(loc.Path)
		}
		if err != nil {
			return nil, fmt.Errorf("bundle %s: %w", location, err)
		}
		return b, nil
	case "s3":
		opts := s3.Options{Bucket: loc.Bucket, Prefix: loc.Prefix, Region: o.S3.Region, Endpoint: o.S3.Endpoint, PathStyle: o.S3.PathStyle, Budget: o.budget}
		o.withTimeouts(&opts, o.S3.Timeouts)
		return s3.New(ctx, opts)
	}
	return nil, fmt.Errorf("bundle location %q: unsupported scheme %q", location, loc.Scheme)
}

// cached returns the shared backend of a root, checked against what the
// root's path names now (each publication resolves its root afresh): when
// the path names another folder, that folder is opened and shared from then
// on; when it names none, the check's ErrRootMissing is returned.
func (o *Opener) cached(ctx context.Context, key string, open func() (storage.Backend, error)) (storage.Backend, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if b, ok := o.cache[key]; ok {
		err := b.CheckRoot(ctx)
		if err == nil {
			return b, nil
		}
		if !errors.Is(err, storage.ErrRootChanged) {
			return nil, err
		}

		// Runs still using the old backend fail their commit check; its
		// descriptor is closed when they drop it (os.Root's finalizer).
	}
	b, err := open()
	if err != nil {
		return nil, err
	}
	if o.cache == nil {
		o.cache = map[string]storage.Backend{}
	}
	o.cache[key] = b
	return b, nil
}

// missingBundle is a local bundle folder that does not exist; it matches
// storage.ErrNotExist.
type missingBundle string

func (m missingBundle) Error() string        { return "bundle folder " + string(m) + " does not exist" }
func (m missingBundle) Is(target error) bool { return target == storage.ErrNotExist }

// withTimeouts applies the configured request limits (zero = the default)
// and reports the requests that hit them to Warn.
func (o *Opener) withTimeouts(opts *s3.Options, t config.S3Timeouts) {
	opts.Timeouts = s3.Timeouts{Connect: time.Duration(t.Connect), FirstByte: time.Duration(t.FirstByte), Idle: time.Duration(t.Idle),
		MinRate: int64(t.MinRate)}
	opts.Timeouts.OnLimit, opts.Warn = o.Warn, o.Warn
	opts.MaxAttempts = t.Attempts
}
