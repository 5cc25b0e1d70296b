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
)

// Timeouts bound each HTTP request to S3; zero fields take the defaults.
type Timeouts struct {
	// Connect bounds the TCP connect and, again, the TLS handshake.
	Connect time.Duration
	// FirstByte bounds the wait for the response headers once the request
	// is sent.
	FirstByte time.Duration
	// Idle fails a request whose body (sent or received) makes no progress
	// for this long; a slow but moving transfer is never cut.
	Idle time.Duration
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
	// Phase is "connect", "TLS handshake", "first byte", "idle upload" or
	// "idle download".
	Phase string
	Limit time.Duration
	Err   error
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
	}
	return fmt.Sprintf("sent no response bytes for %s (idle)", e.Limit)
}

func (e *TimeoutError) Unwrap() error   { return e.Err }
func (e *TimeoutError) Timeout() bool   { return true }
func (e *TimeoutError) Temporary() bool { return true }

// errStalled is the cause of a request cancelled by the idle watchdog.
var errStalled = errors.New("no progress")

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
	w := &watchdog{idle: c.t.Idle, cancel: cancel}
	ctx = httptrace.WithClientTrace(ctx, &httptrace.ClientTrace{
		GotConn:      func(httptrace.GotConnInfo) { w.arm("idle upload") },
		WroteRequest: func(httptrace.WroteRequestInfo) { w.disarm() },
	})
	req = req.WithContext(ctx)
	if req.Body != nil && req.Body != http.NoBody {
		req.Body = &progressBody{ReadCloser: req.Body, w: w}
	}
	resp, err := c.inner.Do(req)
	w.disarm()
	if err != nil {
		err = c.classify(w, err)
		cancel(nil)
		return nil, err
	}
	resp.Body = &watchedBody{ReadCloser: resp.Body, w: w, cancel: cancel}
	return resp, nil
}

// classify names the timeout err hit, if any.
func (c *timeoutClient) classify(w *watchdog, err error) error {
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

// watchdog cancels a request when it is armed for longer than idle.
type watchdog struct {
	idle   time.Duration
	cancel context.CancelCauseFunc

	mu    sync.Mutex
	timer *time.Timer
	phase string // what the armed timer waits for
	fire  string // the phase that timed out
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
// bytes: a transport blocked on a full socket takes none.
type progressBody struct {
	io.ReadCloser
	w *watchdog
}

func (b *progressBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if n > 0 {
		b.w.arm("idle upload")
	}
	return n, err
}

// watchedBody bounds each read of the response body by the idle limit and
// releases the request's context when closed.
type watchedBody struct {
	io.ReadCloser
	w      *watchdog
	cancel context.CancelCauseFunc
}

func (b *watchedBody) Read(p []byte) (int, error) {
	b.w.arm("idle download")
	n, err := b.ReadCloser.Read(p)
	b.w.disarm()
	if err != nil && err != io.EOF {
		if phase := b.w.fired(); phase != "" {
			err = &TimeoutError{Phase: phase, Limit: b.w.idle, Err: err}
		}
	}
	return n, err
}

func (b *watchedBody) Close() error {
	err := b.ReadCloser.Close()
	b.cancel(nil)
	return err
}
