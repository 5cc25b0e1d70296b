// Package notify tells downstream systems about a destination's results:
// webhooks, CloudFront invalidations and cache purges. Each target gets
// every result it asks for at least once, with the result's id on every
// attempt; failing attempts are retried with exponential back-off until
// the target's max_age has passed since the result.
package notify

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/distributor/distributor/config"
	"github.com/distributor/distributor/events"
)

// Headers every webhook and purge request carries.
const (
	HeaderEventID   = "Distributor-Event-Id"
	HeaderSignature = "Distributor-Signature"
	HeaderEventType = "Distributor-Event-Type"
)

// Outcomes counted by an Observer.
const (
	OutcomeDelivered = "delivered" // an attempt succeeded
	OutcomeRetried   = "retried"   // an attempt failed; another follows
	OutcomeFailed    = "failed"    // delivery given up after max_age
)

// Observer counts deliveries (metrics.Metrics implements it).
type Observer interface {
	// NotifyDone reports one attempt's outcome; latency is from the
	// result's time to the delivered call (0 unless delivered).
	NotifyDone(destination, target, outcome string, latency time.Duration)
}

// sender delivers one result to one downstream system in one attempt.
type sender interface {
	send(ctx context.Context, r events.Result, body []byte) error
}

// Target is one configured notify target of a destination.
type Target struct {
	Destination config.Destination
	Name        string
	Config      config.NotifyTarget
	sender      sender
}

// Options tune targets; zero fields take the defaults.
type Options struct {
	// Backoff is the wait after the first failed attempt (default 1s);
	// each further wait doubles, up to MaxBackoff (default 5m).
	Backoff, MaxBackoff time.Duration

	// LookupEnv reads secret_env (default os.LookupEnv).
	LookupEnv func(string) (string, bool)

	// CloudFront configures the CloudFront client (tests: credentials).
	CloudFront CloudFrontOptions
}

func (o Options) withDefaults() Options {
	if o.Backoff <= 0 {
		o.Backoff = time.Second
	}
	if o.MaxBackoff <= 0 {
		o.MaxBackoff = 5 * time.Minute
	}
	if o.LookupEnv == nil {
		o.LookupEnv = os.LookupEnv
	}
	return o
}

// Targets builds every notify target of the configuration's destinations.
func Targets(ctx context.Context, cfg *config.Config, opts Options) ([]*Target, error) {
	var all []*Target
	for _, d := range cfg.Destinations {
		ts, err := DestinationTargets(ctx, d, opts)
		if err != nil {
			return nil, err
		}
		all = append(all, ts...)
	}
	return all, nil
}

// DestinationTargets builds the notify targets of one destination.
func DestinationTargets(ctx context.Context, d config.Destination, opts Options) ([]*Target, error) {
	opts = opts.withDefaults()
	var out []*Target
	for i, c := range d.Notify {
		t := &Target{Destination: d, Name: d.NotifyName(i), Config: c}
		switch c.Type {
		case config.NotifyWebhook:
			secret, err := c.Secret(opts.LookupEnv)
			if err != nil {
				return nil, fmt.Errorf("destination %s: notify target %s: %w", d.ID, t.Name, err)
			}
			t.sender = &webhook{url: c.URL, secret: []byte(secret)}
		case config.NotifyCloudFront:
			cf, err := newCloudFront(ctx, d, c, opts.CloudFront)
			if err != nil {
				return nil, fmt.Errorf("destination %s: notify target %s: %w", d.ID, t.Name, err)
			}
			t.sender = cf
		case config.NotifyPurge:
			t.sender = &purge{dest: d, method: c.Method, concurrency: c.Concurrency}
		default:
			return nil, fmt.Errorf("destination %s: notify target %s: unknown type %q", d.ID, t.Name, c.Type)
		}
		out = append(out, t)
	}
	return out, nil
}

// Attempt makes one delivery attempt, bounded by the target's timeout.
func (t *Target) Attempt(ctx context.Context, r events.Result, body []byte) error {
	ctx, cancel := context.WithTimeout(ctx, time.Duration(t.Config.Timeout))
	defer cancel()
	if err := t.sender.send(ctx, r, body); err != nil {
		return fmt.Errorf("notify %s of %s: %w", t.Name, t.Destination.ID, err)
	}
	return nil
}

// Expired reports whether the result is older than the target's max_age:
// a failed attempt is then the last.
func (t *Target) Expired(r events.Result, now time.Time) bool {
	return now.Sub(r.Time) >= time.Duration(t.Config.MaxAge)
}

// backoff is the wait after failed attempt n (1 = the first).
func backoff(o Options, n int) time.Duration {
	d := o.Backoff
	for i := 1; i < n && d < o.MaxBackoff; i++ {
		d *= 2
	}
	return min(d, o.MaxBackoff)
}

// ErrGaveUp: a delivery was given up (max_age passed or the context ended).
var ErrGaveUp = errors.New("notify delivery given up")

// Deliver delivers r to t in this process: attempts with back-off until
// one succeeds, the result is older than max_age, or ctx ends. apply
// without NATS and `notify replay` use it; the error wraps ErrGaveUp and
// the last attempt's error.
func Deliver(ctx context.Context, t *Target, r events.Result, body []byte, opts Options, obs Observer) (attempts int, err error) {
	opts = opts.withDefaults()
	for n := 1; ; n++ {
		err := t.Attempt(ctx, r, body)
		if err == nil {
			observe(obs, t, OutcomeDelivered, time.Since(r.Time))
			return n, nil
		}
		wait := backoff(opts, n)
		if t.Expired(r, time.Now().Add(wait)) || ctx.Err() != nil {
			observe(obs, t, OutcomeFailed, 0)
			return n, fmt.Errorf("%w after %d attempt(s): %w", ErrGaveUp, n, err)
		}
		observe(obs, t, OutcomeRetried, 0)
		select {
		case <-ctx.Done():
			observe(obs, t, OutcomeFailed, 0)
			return n, fmt.Errorf("%w after %d attempt(s): %w", ErrGaveUp, n, err)
		case <-time.After(wait):
		}
	}
}

func observe(obs Observer, t *Target, outcome string, latency time.Duration) {
	if obs != nil {
		obs.NotifyDone(t.Destination.ID, t.Name, outcome, latency)
	}
}

// Sign is the Distributor-Signature of body: "sha256=" and the hex
// HMAC-SHA256 of body under secret.
func Sign(secret, body []byte) string {
	mac := hmac.New(sha256.New, secret)
	mac.Write(body)
	return "sha256=" + hex.EncodeToString(mac.Sum(nil))
}
