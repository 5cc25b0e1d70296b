// Package probe checks that a destination's storage keeps what distributor
// relies on: permissions, conditional writes (and their atomicity under a
// race), aborted multipart uploads, the server's clock, and for local
// roots the file system calls the local backend makes. It works on
// scratch objects under the root's .distributor/ area and removes them.
// `distributor doctor` prints its checks; `serve` runs the cheap ones.
package probe

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"time"

	"github.com/distributor/distributor/catalog"
	"github.com/distributor/distributor/storage"
)

// Check is the outcome of one check.
type Check struct {
	// Name identifies the check: read, write, list, delete,
	// create_if_absent, if_match, create_race, update_race,
	// multipart_abort, clock, rename, link, fsync.
	Name string `json:"name"`

	// OK is true when the storage keeps what the check asks.
	OK bool `json:"ok"`

	// Detail says what was seen.
	Detail string `json:"detail"`

	// Consequence says what follows when OK is false.
	Consequence string `json:"consequence,omitempty"`

	// Fence is true when distributor's fence (the lease and the
	// catalog's compare-and-swap) cannot hold without it.
	Fence bool `json:"fence"`
}

// Options bound a probe.
type Options struct {
	// Races runs the race checks (hundreds of requests); without it
	// only the cheap checks run.
	Races bool

	// Writers race each round (default 8); Rounds of create races
	// (default 10); Updates per writer in the update race (default 10).
	Writers, Rounds, Updates int

	// MaxClockSkew is how far the server's clock may be from Now's
	// (default 5m).
	MaxClockSkew time.Duration

	// Now is this host's clock (default time.Now).
	Now func() time.Time
}

func (o Options) withDefaults() Options {
	if o.Writers <= 0 {
		o.Writers = 8
	}
	if o.Rounds <= 0 {
		o.Rounds = 10
	}
	if o.Updates <= 0 {
		o.Updates = 10
	}
	if o.MaxClockSkew <= 0 {
		o.MaxClockSkew = 5 * time.Minute
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	return o
}

// ServerClock is a backend whose server says its time (S3: the Date
// header of an answer).
type ServerClock interface {
	ServerTime(ctx context.Context) (time.Time, error)
}

// UploadAborter is a backend that can start a multipart upload of p,
// upload a part, abort it and report what the server still keeps.
type UploadAborter interface {
	CheckAbortedUpload(ctx context.Context, p string) error
}

// Failed reports whether any check failed, and whether one the fence
// needs did.
func Failed(checks []Check) (any, fence bool) {
	for _, c := range checks {
		if !c.OK {
			any = true
			fence = fence || c.Fence
		}
	}
	return any, fence
}

// Backend runs the checks on b, under a fresh scratch folder in the
// root's .distributor/ area, and removes what it wrote.
func Backend(ctx context.Context, b storage.Backend, opts Options) []Check {
	opts = opts.withDefaults()
	dir := scratchDir()
	p := &prober{b: b, dir: dir, opts: opts}
	defer p.cleanup(context.WithoutCancel(ctx))
	checks := p.basics(ctx)
	checks = append(checks, p.conditions(ctx)...)
	if opts.Races {
		checks = append(checks, p.createRace(ctx), p.updateRace(ctx))
	}
	if a, ok := b.(UploadAborter); ok {
		checks = append(checks, p.abortedUpload(ctx, a))
	}
	if c, ok := b.(ServerClock); ok {
		checks = append(checks, p.clock(ctx, c))
	}
	return checks
}

// scratchDir is a fresh folder name under the reserved area.
func scratchDir() string {
	var rnd [6]byte
	_, _ = rand.Read(rnd[:])
	return catalog.ReservedDir + "/doctor-" + hex.EncodeToString(rnd[:])
}

type prober struct {
	b       storage.Backend
	dir     string
	opts    Options
	written []string
}

func (p *prober) path(name string) string {
	full := p.dir + "/" + name
	p.written = append(p.written, full)
	return full
}

// cleanup deletes every scratch object (missing ones are fine).
func (p *prober) cleanup(ctx context.Context) {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	_ = p.b.Delete(ctx, p.written...)
}

func pass(name, detail string) Check { return Check{Name: name, OK: true, Detail: detail} }

func fail(name string, fence bool, consequence string, format string, a ...any) Check {
	return Check{Name: name, Detail: fmt.Sprintf(format, a...), Consequence: consequence, Fence: fence}
}

// conflict reports whether err is a lost condition.
func conflict(err error) bool { return errors.Is(err, storage.ErrConflict) }
