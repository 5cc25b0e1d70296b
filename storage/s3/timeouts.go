package s3

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptrace"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
)

// Default request timeouts: generous for AWS, yet a hung server fails a
// request within about a minute instead of never.
const (
	DefaultConnectTimeout   = 10 * time.Second
	DefaultFirstByteTimeout = 30 * time.Second
	DefaultIdleTimeout      = 30 * time.Second

	// DefaultMinRate is the slowest transfer allowed, in bytes per second
	// (averaged over each Idle of waiting): far below any working link,
	// far above a server that trickles a byte at a time.
	DefaultMinRate = 1024
)

// Timeouts bound each HTTP request to S3; zero fields take the defaults.
type Timeouts struct {
	// Connect bounds the TCP connect and, again, the TLS handshake.
	Connect time.Duration

	// FirstByte bounds the wait for the response headers once the request
	// is sent.
	FirstByte time.Duration

	// Idle fails a request whose body (sent or received) makes no progress
	// for this long.
	Idle time.Duration

	// MinRate fails a request whose body (sent or received) moves fewer
	// bytes per second than this, averaged over each Idle of time spent
	// waiting for the server (curl's --speed-limit, with --speed-time =
	// Idle): a trickling server cannot hold a transfer forever.
	MinRate int64

	// OnLimit, when set, is told of each request that hits a limit, as it
	// happens (the caller logs it): err names the request and wraps the
	// *TimeoutError; ctx is the request's.
	OnLimit func(ctx context.Context, err error)
}

func (t Timeouts) withDefaults() Timeouts {
	if t.Connect <= 0 {
		t.Connect = DefaultConnectTimeout
	}
	if t.FirstByte <= 0 {
		t.FirstByte = DefaultFirstByteTimeout
	}
	if t.Idle <= 0 {
		t.Idle = DefaultIdleTimeout
	}
	if t.MinRate <= 0 {
		t.MinRate = DefaultMinRate
	}
	return t
}

// buildableClient is the SDK's HTTP client with the connect, TLS and
// first-byte limits. It stays a *BuildableClient so that the SDK can still
// load AWS_CA_BUNDLE into it.
func buildableClient(t Timeouts) *awshttp.BuildableClient {
	return awshttp.NewBuildableClient().
		WithDialerOptions(func(d *net.Dialer) { d.Timeout = t.Connect }).
		WithTransportOptions(func(tr *http.Transport) {
			tr.TLSHandshakeTimeout = t.Connect
			tr.ResponseHeaderTimeout = t.FirstByte
		})
}

// TimeoutError is a request that hit one of the Timeouts. It is a
// net.Error timeout, so the SDK's retryer tries the request again.
type TimeoutError struct {
	// Phase is "connect", "TLS handshake", "first byte", "idle upload",
	// "idle download", "slow upload" or "slow download".
	Phase string
	Limit time.Duration

	// Moved and MinRate: the bytes a slow transfer moved in Limit, and
	// the rate it fell below.
	Moved   int64
	MinRate int64
	Err     error
}

func (e *TimeoutError) Error() string {
	switch e.Phase {
	case "connect":
		return fmt.Sprintf("did not accept a connection within %s (connect)", e.Limit)
	case "TLS handshake":
		return fmt.Sprintf("did not complete the TLS handshake within %s (connect)", e.Limit)
	case "first byte":
		return fmt.Sprintf("did not answer within %s (first byte)", e.Limit)
	case "idle upload":
		return fmt.Sprintf("took no request bytes for %s (idle)", e.Limit)
	case "slow upload":
		return fmt.Sprintf("took %d request bytes in %s, below %d bytes/s (min_rate)", e.Moved, e.Limit.Round(time.Millisecond), e.MinRate)
	case "slow download":
		return fmt.Sprintf("sent %d response bytes in %s, below %d bytes/s (min_rate)", e.Moved, e.Limit.Round(time.Millisecond), e.MinRate)
	}
	return fmt.Sprintf("sent no response bytes for %s (idle)", e.Limit)
}

func (e *TimeoutError) Unwrap() error   { return e.Err }
func (e *TimeoutError) Timeout() bool   { return true }
func (e *TimeoutError) Temporary() bool { return true }

// errStalled is the cause of a request cancelled by the idle watchdog;
// errSlow of one cancelled for moving too slowly.
var (
	errStalled = errors.New("no progress")
	errSlow    = errors.New("below the minimum rate")
)

// timeoutClient adds the idle limit to each HTTP request and names the
// limit a failed request hit. The transport has no idle limit of its own
// that would not also cut long uploads (its read deadline runs while the
// request body is still being sent), so a watchdog cancels the request
// when its body stops moving: from the connection until the request is
// written, and during each read of the response body.
type timeoutClient struct {
	inner aws.HTTPClient
	t     Timeouts
}

func (c *timeoutClient) Do(req *http.Request) (*http.Response, error) {
	ctx, cancel := context.WithCancelCause(req.Context())
	w := &watchdog{idle: c.t.Idle, cancel: cancel, ctx: req.Context(), onLimit: c.t.OnLimit,
		what: req.Method + " " + req.URL.Scheme + "://" + req.URL.Host + req.URL.EscapedPath()}
	ctx = httptrace.WithClientTrace(ctx, &httptrace.ClientTrace{
		GotConn:      func(httptrace.GotConnInfo) { w.arm("idle upload") },
		WroteRequest: func(httptrace.WroteRequestInfo) { w.disarm() },
	})
	req = req.WithContext(ctx)
	if req.Body != nil && req.Body != http.NoBody {
		req.Body = &progressBody{ReadCloser: req.Body, w: w, rate: rateMeter{min: c.t.MinRate, span: c.t.Idle}}
	}
	resp, err := c.inner.Do(req)
	w.disarm()
	if err != nil {
		err = c.classify(w, err)
		var te *TimeoutError
		if errors.As(err, &te) {
			w.report(te)
		}
		cancel(nil)
		return nil, err
	}
	resp.Body = &watchedBody{ReadCloser: resp.Body, w: w, cancel: cancel, rate: rateMeter{min: c.t.MinRate, span: c.t.Idle}}
	return resp, nil
}

// classify names the timeout err hit, if any.
func (c *timeoutClient) classify(w *watchdog, err error) error {
	if slow := w.slowErr(); slow != nil {
		te := *slow
		te.Err = err
		return &te
	}
	if phase := w.fired(); phase != "" {
		return &TimeoutError{Phase: phase, Limit: c.t.Idle, Err: err}
	}
	var op *net.OpError
	switch msg := err.Error(); {
	case errors.As(err, &op) && op.Op == "dial" && op.Timeout():
		return &TimeoutError{Phase: "connect", Limit: c.t.Connect, Err: err}
	case strings.Contains(msg, "TLS handshake timeout"):
		return &TimeoutError{Phase: "TLS handshake", Limit: c.t.Connect, Err: err}
	case strings.Contains(msg, "timeout awaiting response headers"):
		return &TimeoutError{Phase: "first byte", Limit: c.t.FirstByte, Err: err}
	}
	return err
}

// watchdog cancels a request when it is armed for longer than idle, or
// when its body moves too slowly (trip).
type watchdog struct {
	idle    time.Duration
	cancel  context.CancelCauseFunc
	ctx     context.Context // the request's, for onLimit
	onLimit func(context.Context, error)
	what    string // the request, for onLimit

	mu       sync.Mutex
	timer    *time.Timer
	phase    string        // what the armed timer waits for
	fire     string        // the phase that timed out
	slow     *TimeoutError // why trip cancelled the request
	reported bool          // onLimit was told
}

// trip cancels the request for moving too slowly, and says so.
func (w *watchdog) trip(te *TimeoutError) {
	w.mu.Lock()
	first := w.fire == ""
	if first {
		w.fire, w.slow = te.Phase, te
	}
	w.mu.Unlock()
	if first {
		w.cancel(errSlow)
		w.report(te)
	}
}

func (w *watchdog) slowErr() *TimeoutError {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.slow
}

// report tells onLimit, if any, of te: once per request.
func (w *watchdog) report(te *TimeoutError) {
	w.mu.Lock()
	first := !w.reported
	w.reported = true
	w.mu.Unlock()
	if first && w.onLimit != nil {
		w.onLimit(w.ctx, fmt.Errorf("S3 request %s %w", w.what, te))
	}
}

// rateMeter measures a body's rate over windows of at least span of
// waiting for it.
type rateMeter struct {
	min    int64 // bytes per second
	span   time.Duration
	bytes  int64
	waited time.Duration
}

// add counts n bytes that took d of waiting. When that closes a window
// whose rate is below min, it returns the bytes and time of the window.
func (m *rateMeter) add(n int, d time.Duration) (moved int64, over time.Duration, slow bool) {
	m.bytes += int64(n)
	m.waited += d
	if m.min <= 0 || m.waited < m.span {
		return 0, 0, false
	}
	moved, over = m.bytes, m.waited
	m.bytes, m.waited = 0, 0
	return moved, over, float64(moved) < float64(m.min)*over.Seconds()
}

func (w *watchdog) arm(phase string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.fire != "" {
		return
	}
	w.phase = phase
	if w.timer == nil {
		w.timer = time.AfterFunc(w.idle, w.expire)
		return
	}
	w.timer.Reset(w.idle)
}

func (w *watchdog) disarm() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.timer != nil {
		w.timer.Stop()
	}
}

func (w *watchdog) expire() {
	w.mu.Lock()
	if w.fire != "" {
		w.mu.Unlock()
		return
	}
	w.fire = w.phase
	w.mu.Unlock()
	w.cancel(errStalled)
}

func (w *watchdog) fired() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.fire
}

// progressBody re-arms the watchdog each time the transport takes request
// bytes: a transport blocked on a full socket takes none. The time from
// one read's end to the next one's start is the transport sending what
// the first one gave it: the rate meter's waiting time.
type progressBody struct {
	io.ReadCloser
	w     *watchdog
	rate  rateMeter
	last  time.Time // when the last read returned
	lastN int       // what it returned
}

func (b *progressBody) Read(p []byte) (int, error) {
	if !b.last.IsZero() {
		if moved, over, slow := b.rate.add(b.lastN, time.Since(b.last)); slow {
			te := &TimeoutError{Phase: "slow upload", Limit: over, Moved: moved, MinRate: b.rate.min, Err: errSlow}
			b.w.trip(te)
			return 0, te
		}
	}
	n, err := b.ReadCloser.Read(p)
	b.last, b.lastN = time.Now(), n
	if n > 0 {
		b.w.arm("idle upload")
	}
	return n, err
}

// watchedBody bounds each read of the response body by the idle limit and
// the time spent in reads by the minimum rate, and releases the request's
// context when closed.
type watchedBody struct {
	io.ReadCloser
	w      *watchdog
	cancel context.CancelCauseFunc
	rate   rateMeter
}

func (b *watchedBody) Read(p []byte) (int, error) {
	b.w.arm("idle download")
	start := time.Now()
	n, err := b.ReadCloser.Read(p)
	b.w.disarm()
	if err == nil {
		if moved, over, slow := b.rate.add(n, time.Since(start)); slow {
			te := &TimeoutError{Phase: "slow download", Limit: over, Moved: moved, MinRate: b.rate.min, Err: errSlow}
			b.w.trip(te)
			return n, te
		}
	}
	if err != nil && err != io.EOF {
		if slow := b.w.slowErr(); slow != nil {
			te := *slow
			te.Err = err
			return n, &te
		}
		if phase := b.w.fired(); phase != "" {
			te := &TimeoutError{Phase: phase, Limit: b.w.idle, Err: err}
			b.w.report(te)
			err = te
		}
	}
	return n, err
}

func (b *watchedBody) Close() error {
	err := b.ReadCloser.Close()
	b.cancel(nil)
	return err
}
