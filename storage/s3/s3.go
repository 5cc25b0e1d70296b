// Package s3 is the storage.Backend for a bucket and key prefix on S3
// or an S3-compatible server.
package s3

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"hash"
	"io"
	"mime"
	"net"
	"net/url"
	"path"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/ratelimit"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/feature/s3/transfermanager"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/aws/smithy-go"
	"github.com/aws/smithy-go/logging"
	smithyhttp "github.com/aws/smithy-go/transport/http"

	"github.com/distributor/distributor/catalog"
	"github.com/distributor/distributor/storage"
)

// ErrNoBucket: the bucket does not exist or the credentials may not see it.
var ErrNoBucket = errors.New("s3 bucket does not exist (or no access)")

const (
	defaultConcurrency = 4
	defaultPartSize    = 8 << 20

	// defaultCatalogInMemory: see Options.CatalogInMemory.
	defaultCatalogInMemory = 8 << 20

	// defaultMemoryBudget bounds the upload buffers of one Backend (one
	// destination root); see Options.MemoryBudget.
	defaultMemoryBudget = 64 << 20

	// partsBesideConcurrency: besides the parts in flight, a multipart
	// upload holds the part being filled and its first part, which the
	// transfer manager reads before its pool of Concurrency+1 parts exists.
	partsBesideConcurrency = 3

	// minPartSize and maxUploadParts are S3's multipart limits.
	minPartSize    = 5 << 20
	maxUploadParts = 10000

	// maxDeleteBatch is the DeleteObjects limit per request.
	maxDeleteBatch = 1000

	// defaultSinglePutMax: objects with a known sha256 up to this size go
	// as one streamed PutObject (rclone's upload cutoff is 200 MiB).
	defaultSinglePutMax = 256 << 20

	// maxSinglePut is S3's limit for one PutObject.
	maxSinglePut = 5 << 30

	// metaSHA256 is stored as x-amz-meta-sha256.
	metaSHA256 = "sha256"

	// abortTimeout bounds the clean-up of a failed multipart upload, which
	// runs even when the caller's context is already cancelled.
	abortTimeout = 30 * time.Second
)

// Options configure a Backend.
type Options struct {
	Bucket string

	// Prefix is the key prefix of the root inside the bucket ("" = whole bucket).
	Prefix string

	// Region; empty takes the standard AWS chain's (us-east-1 with a custom endpoint).
	Region string

	// Endpoint of an S3-compatible server (http(s)://host:port); empty = AWS.
	Endpoint string

	// PathStyle addresses buckets as endpoint/bucket (always on with Endpoint).
	PathStyle bool

	// Concurrency is the number of multipart parts in flight per Put
	// (default 4), lowered to fit MemoryBudget.
	Concurrency int

	// PartSize is the multipart part size (default 8 MiB, at least 5 MiB).
	PartSize int64

	// MemoryBudget bounds the bytes that all of this Backend's Puts buffer
	// at once (default 64 MiB, at least 4 parts): a multipart Put holds
	// (Concurrency+3) parts, a smaller object its own size. Puts wait for
	// room, so concurrent writers (Engine.Workers) share the budget instead
	// of multiplying it. An object too large for 10,000 parts of PartSize
	// gets larger parts and then takes the whole budget. Staged writes
	// (Stage) hold small objects until their commit in a share of their
	// own, MemoryBudget/4 beside it; large staged objects stream (no
	// buffer). The default bounds upload buffers at 64 + 16 MiB. Ignored
	// when Budget is set.
	MemoryBudget int64

	// Budget, when set, is the upload memory this Backend shares with
	// every other Backend given the same one (stores.Opener gives all of a
	// process's S3 roots one): the bound then holds for all of them
	// together, however many workers publish at once. Nil: a Budget of
	// MemoryBudget of its own.
	Budget *Budget

	// SinglePutMax: a Put of an object over PartSize and up to this size
	// whose sha256 is known streams it as one PutObject signed with that
	// sha256: no part buffers, no completion (default 256 MiB, at most
	// 5 GiB; negative: never). Larger objects go multipart.
	SinglePutMax int64

	// CatalogInMemory: a catalog of up to this many bytes waits for its
	// commit in memory; a larger one in a temporary file (in TMPDIR; in
	// memory where none can be made or it runs out of room). Default
	// 8 MiB; negative: always in memory.
	CatalogInMemory int64

	// Warn, when set, is told of trouble the backend works around, as it
	// happens: a catalog held in memory for want of a temporary file
	// (*InMemoryError). Requests cut by a limit go to Timeouts.OnLimit.
	Warn func(ctx context.Context, err error)

	// Timeouts bound each request (New only; NewFromClient keeps the
	// client's own).
	Timeouts Timeouts

	// MaxAttempts is how often New's client tries a request that failed
	// transiently, timeouts included (the SDK's standard retryer; default 3).
	MaxAttempts int

	// MaxBackoff caps the retryer's back-off between attempts (default 20s).
	MaxBackoff time.Duration
}

// Backend is a destination root (or bundle location) at s3://bucket/prefix.
type Backend struct {
	client   *s3.Client
	uploader *transfermanager.Client
	bucket   string
	prefix   string // "" or ends with "/"
	partSize int64

	// singlePutMax: see Options.SinglePutMax.
	singlePutMax int64

	// catalogInMemory, warn: see Options.CatalogInMemory, Options.Warn.
	catalogInMemory int64
	warn            func(ctx context.Context, err error)

	// concurrency is the parts in flight per multipart Put; mem is the
	// upload memory budget (Options.Budget), budget its size in bytes.
	concurrency int
	budget      int64
	mem         *Budget
	endpoint    string // for messages

	// bucketSeen: HeadBucket, or a HeadObject or compare-and-swap write of
	// an object in the bucket, succeeded once, so a 404 from HeadObject
	// means a missing key.
	bucketSeen atomic.Bool
}

var _ storage.Backend = (*Backend)(nil)

// New builds a Backend with credentials from the standard AWS chain (env,
// shared config, web identity, IMDS). It does not contact S3; call
// CheckBucket for an early, clear error.
func New(ctx context.Context, opts Options) (*Backend, error) {
	if opts.Endpoint != "" {
		u, err := url.Parse(opts.Endpoint)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return nil, fmt.Errorf("invalid s3 endpoint %q: want http(s)://host[:port]", opts.Endpoint)
		}
	}
	timeouts := opts.Timeouts.withDefaults()

	// The SDK's buildable HTTP client, so that LoadDefaultConfig can still
	// load AWS_CA_BUNDLE into it.
	// The SDK's own log lines (an IMDS fallback warning) would repeat
	// what the returned error says.
	load := []func(*config.LoadOptions) error{config.WithHTTPClient(buildableClient(timeouts)), config.WithLogger(logging.Nop{})}
	if opts.Region != "" {
		load = append(load, config.WithRegion(opts.Region))
	}
	cfg, err := config.LoadDefaultConfig(ctx, load...)
	if err != nil {
		return nil, fmt.Errorf("load AWS configuration for s3://%s: %w", opts.Bucket, err)
	}
	if cfg.Region == "" {
		if opts.Endpoint == "" {
			return nil, fmt.Errorf("s3://%s: no AWS region: set region in the destination or AWS_REGION", opts.Bucket)
		}
		cfg.Region = "us-east-1"
	}
	client := s3.NewFromConfig(cfg, func(o *s3.Options) {
		// Wrapped last, after the SDK has tuned its buildable client.
		o.HTTPClient = &timeoutClient{inner: o.HTTPClient, t: timeouts}
		o.Retryer = retry.NewStandard(func(so *retry.StandardOptions) {
			if opts.MaxAttempts > 0 {
				so.MaxAttempts = opts.MaxAttempts
			}
			if opts.MaxBackoff > 0 {
				so.MaxBackoff = opts.MaxBackoff
			}
		})
		o.UsePathStyle = opts.PathStyle
		if opts.Endpoint != "" {
			o.BaseEndpoint = aws.String(opts.Endpoint)
			o.UsePathStyle = true

			// S3-compatible servers often mishandle the SDK's default
			// streaming checksums (gofakes3 stores the aws-chunked framing).
			o.RequestChecksumCalculation = aws.RequestChecksumCalculationWhenRequired
			o.ResponseChecksumValidation = aws.ResponseChecksumValidationWhenRequired
		}
	})
	return NewFromClient(client, opts.Bucket, opts.Prefix, opts)
}

// NewFromClient builds a Backend on an existing client (tests, custom
// setups); opts.Bucket and opts.Prefix are ignored in favour of the arguments.
func NewFromClient(client *s3.Client, bucket, prefix string, opts Options) (*Backend, error) {
	if bucket == "" {
		return nil, errors.New("s3 destination has no bucket: set bucket")
	}
	p, err := cleanPrefix(prefix)
	if err != nil {
		return nil, err
	}
	if opts.Concurrency <= 0 {
		opts.Concurrency = defaultConcurrency
	}
	if opts.PartSize == 0 {
		opts.PartSize = defaultPartSize
	}
	if opts.PartSize < minPartSize {
		return nil, fmt.Errorf("s3 part size %d is below the S3 minimum of %d bytes", opts.PartSize, minPartSize)
	}
	if opts.SinglePutMax == 0 {
		opts.SinglePutMax = defaultSinglePutMax
	}
	opts.SinglePutMax = min(opts.SinglePutMax, maxSinglePut)
	if opts.CatalogInMemory == 0 {
		opts.CatalogInMemory = defaultCatalogInMemory
	}
	if opts.Budget != nil {
		opts.MemoryBudget = opts.Budget.Size()
	}
	if opts.MemoryBudget == 0 {
		opts.MemoryBudget = max(defaultMemoryBudget, (1+partsBesideConcurrency)*opts.PartSize)
	}
	fit := opts.MemoryBudget/opts.PartSize - partsBesideConcurrency
	if fit < 1 {
		return nil, fmt.Errorf("s3 memory budget %d bytes is below 4 parts of %d bytes: raise the budget or lower the part size", opts.MemoryBudget, opts.PartSize)
	}
	opts.Concurrency = int(min(int64(opts.Concurrency), fit))
	mem := opts.Budget
	if mem == nil {
		mem = NewBudget(opts.MemoryBudget)
	}
	co := client.Options()
	endpoint := aws.ToString(co.BaseEndpoint)
	if endpoint == "" {
		endpoint = "AWS S3 (" + co.Region + ")"
	}
	up := transfermanager.New(client, func(o *transfermanager.Options) {
		o.PartSizeBytes = opts.PartSize
		o.Concurrency = opts.Concurrency
		o.MultipartUploadThreshold = opts.PartSize
		o.RequestChecksumCalculation = co.RequestChecksumCalculation
	})
	return &Backend{client: client, uploader: up, bucket: bucket, prefix: p, partSize: opts.PartSize, singlePutMax: opts.SinglePutMax,
		catalogInMemory: opts.CatalogInMemory, warn: opts.Warn, concurrency: opts.Concurrency, budget: opts.MemoryBudget, mem: mem, endpoint: endpoint}, nil
}

// cleanPrefix turns "a/b", "/a/b/" into "a/b/"; "" stays "".
func cleanPrefix(prefix string) (string, error) {
	p := strings.Trim(prefix, "/")
	if p == "" {
		return "", nil
	}
	if err := catalog.ValidatePath(p); err != nil {
		return "", fmt.Errorf("invalid s3 key prefix %q (use a/b/ style, no '.', '..' or empty segments): %w", prefix, err)
	}
	return p + "/", nil
}

// String names the root: s3://bucket/prefix/.
func (b *Backend) String() string { return "s3://" + b.bucket + "/" + b.prefix }

// CheckBucket verifies that the bucket exists and is reachable.
func (b *Backend) CheckBucket(ctx context.Context) error {
	_, err := b.client.HeadBucket(ctx, &s3.HeadBucketInput{Bucket: &b.bucket})
	if err == nil {
		b.bucketSeen.Store(true)
		return nil
	}
	switch status := httpStatus(err); {
	case status == 404 || apiCode(err) == "NoSuchBucket":
		return b.noBucket()
	case status == 403:
		return fmt.Errorf("s3 bucket %q: %w: check the AWS credentials and the bucket policy: %w", b.bucket, storage.ErrDenied, err)
	case isTransient(err):
		var te *TimeoutError
		if errors.As(err, &te) {
			return fmt.Errorf("S3 endpoint %s %s (bucket %q): %w: %w", b.endpoint, te, b.bucket, storage.ErrUnavailable, err)
		}
		return fmt.Errorf("cannot reach S3 endpoint %s for bucket %q: %w: %w", b.endpoint, b.bucket, storage.ErrUnavailable, err)
	}
	return fmt.Errorf("check s3 bucket %q: %w", b.bucket, err)
}

func (b *Backend) noBucket() error {
	return fmt.Errorf("s3 bucket %q does not exist (or no access) at %s: create it or fix the destination's bucket: %w", b.bucket, b.endpoint, ErrNoBucket)
}

func (b *Backend) key(p string) (string, error) {
	if err := catalog.ValidatePath(p); err != nil {
		return "", fmt.Errorf("%s: %w", b, err)
	}
	return b.prefix + p, nil
}

// Stat reads the object's size, time and recorded sha256 (HeadObject).
func (b *Backend) Stat(ctx context.Context, p string) (storage.ObjectInfo, error) {
	key, err := b.key(p)
	if err != nil {
		return storage.ObjectInfo{}, err
	}
	out, err := b.head(ctx, "stat", key)
	if err != nil {
		return storage.ObjectInfo{}, err
	}
	return storage.ObjectInfo{
		Path:        p,
		Size:        aws.ToInt64(out.ContentLength),
		ModTime:     aws.ToTime(out.LastModified),
		SHA256:      metaValue(out.Metadata, metaSHA256),
		Fingerprint: aws.ToString(out.ETag),
	}, nil
}

// head is HeadObject with its errors mapped. A HEAD answer has no body, so
// a missing bucket looks like a missing key: the first 404 checks the
// bucket once, lest a deleted or misspelt bucket read as "no outputs".
func (b *Backend) head(ctx context.Context, op, key string) (*s3.HeadObjectOutput, error) {
	out, err := b.client.HeadObject(ctx, &s3.HeadObjectInput{Bucket: &b.bucket, Key: &key})
	if err == nil {
		b.bucketSeen.Store(true) // an object in it: no HeadBucket needed
		return out, nil
	}
	err = b.wrap(op, key, err)
	if errors.Is(err, storage.ErrNotExist) && !b.bucketSeen.Load() {
		if berr := b.CheckBucket(ctx); berr != nil {
			return nil, fmt.Errorf("s3 %s s3://%s/%s: %w", op, b.bucket, key, berr)
		}
	}
	return nil, err
}

// metaValue looks a metadata key up regardless of case: servers differ in
// how they return x-amz-meta-* names.
func metaValue(m map[string]string, k string) string {
	if v, ok := m[k]; ok {
		return v
	}
	for mk, v := range m {
		if strings.EqualFold(mk, k) {
			return v
		}
	}
	return ""
}

// Open streams the object's bytes (GetObject; with Versioned:
// openVersion).
func (b *Backend) Open(ctx context.Context, p string, opts ...storage.Option) (storage.Reader, error) {
	if storage.HasOption(opts, storage.Versioned) {
		return b.openVersion(ctx, p)
	}
	key, err := b.key(p)
	if err != nil {
		return storage.Reader{}, err
	}
	out, err := b.client.GetObject(ctx, &s3.GetObjectInput{Bucket: &b.bucket, Key: &key})
	if err != nil {
		return storage.Reader{}, b.wrap("open", key, err)
	}
	size := int64(-1)
	if out.ContentLength != nil {
		size = *out.ContentLength
	}
	return storage.Reader{ReadCloser: &objectBody{ReadCloser: out.Body, b: b, key: key}, Size: size}, nil
}

// objectBody maps read errors (a stalled download) like the calls' own.
type objectBody struct {
	io.ReadCloser
	b   *Backend
	key string
}

func (o *objectBody) Read(p []byte) (int, error) {
	n, err := o.ReadCloser.Read(p)
	if err != nil && err != io.EOF {
		err = o.b.wrap("read", o.key, err)
	}
	return n, err
}

// Put streams r to the key: one PutObject up to PartSize, a multipart
// upload beyond, within the Backend's memory budget (Options.MemoryBudget:
// it waits for room). The bytes
// must number size (when >= 0) and hash to opts.SHA256 (when set), or
// nothing is stored. A failed multipart upload is aborted, so the old object
// (or none) stays. One case is ambiguous, as with any S3 client: if the
// connection drops after the server completed the upload, the new object
// is there although Put reports an error.
//
// opts.IfAbsent and opts.IfMatch become If-None-Match: * and If-Match on
// the PutObject (or on the CompleteMultipartUpload of a large object), so
// the server refuses a write whose condition no longer holds: ErrConflict.
// Servers that ignore the headers on multipart completion cannot refuse it.
func (b *Backend) Put(ctx context.Context, p string, r io.Reader, size int64, opts storage.PutOptions) (storage.ObjectInfo, error) {
	key, err := b.key(p)
	if err != nil {
		return storage.ObjectInfo{}, err
	}
	body, err := b.checked(p, r, size, opts)
	if err != nil {
		return storage.ObjectInfo{}, err
	}
	body.ctx = ctx
	in := putInput(b, key, opts)
	put := b.putMultipart
	switch {
	case size >= 0 && size <= b.partSize:
		put = b.putSmall
	case b.streams(size, opts):
		put = b.putStream
	}
	etag, err := put(ctx, in, body, size)
	if err != nil {
		return storage.ObjectInfo{}, err
	}
	return storage.ObjectInfo{Path: p, Size: body.n, SHA256: opts.SHA256, Fingerprint: aws.ToString(etag)}, nil
}

// checked wraps r in the reader that counts and (unless the source
// verifies itself) hashes what passes, for a Put of p.
func (b *Backend) checked(p string, r io.Reader, size int64, opts storage.PutOptions) (*checkedReader, error) {
	body := &checkedReader{r: r, size: size, where: b.String() + p}
	if opts.SHA256 == "" {
		return body, nil
	}
	want, ok := catalog.DigestSum(opts.SHA256)
	if !ok {
		return nil, fmt.Errorf("put %s%s: invalid sha256 %q: want sha256:<64 lowercase hex digits>", b, p, opts.SHA256)
	}
	if !opts.SourceVerified {
		body.want, body.h = want, sha256.New()
	}
	return body, nil
}

// putInput is the PutObjectInput of a write with opts (no body yet).
func putInput(b *Backend, key string, opts storage.PutOptions) *s3.PutObjectInput {
	in := &s3.PutObjectInput{Bucket: &b.bucket, Key: &key, Metadata: map[string]string{}}
	if opts.SHA256 != "" {
		in.Metadata[metaSHA256] = opts.SHA256
	}
	if opts.ContentType != "" {
		in.ContentType = aws.String(opts.ContentType)
	}
	switch {
	case opts.IfAbsent:
		in.IfNoneMatch = aws.String("*")
	case opts.IfMatch != "":
		in.IfMatch = aws.String(opts.IfMatch)
	}
	return in
}

// putSmall sends an object of up to PartSize bytes in one PutObject and
// returns its ETag.
func (b *Backend) putSmall(ctx context.Context, in *s3.PutObjectInput, body *checkedReader, size int64) (*string, error) {
	// Small enough for one request: read it whole (checked) and send a
	// seekable body, which the SDK needs over plain http.
	// Reading into size+1 bytes makes checkedReader see either EOF
	// (and check size and digest) or the excess byte.
	if err := b.mem.acquire(ctx, size+1); err != nil {
		return nil, fmt.Errorf("put %s: %w", body.where, err)
	}
	defer b.mem.release(size + 1)
	data := make([]byte, size+1)
	n, err := io.ReadFull(body, data)
	switch {
	case int64(n) > size:
		err = body.err // ReadFull drops the error that came with the excess byte
	case err == io.ErrUnexpectedEOF || (err == io.EOF && size == 0):
		err = nil // checkedReader saw EOF: size and digest are right
	}
	if err != nil {
		return nil, fmt.Errorf("put %s: %w", body.where, err)
	}
	in.Body = bytes.NewReader(data[:n])
	in.ContentLength = aws.Int64(int64(n))
	var optFns []func(*s3.Options)
	if d := in.Metadata[metaSHA256]; d != "" {
		optFns = append(optFns, withPayloadHash(d)) // the bytes were checked against it
	}
	out, err := b.client.PutObject(ctx, in, optFns...)
	if err != nil {
		return nil, b.settleLostAnswer(ctx, in, false, b.wrapPut(*in.Key, conditional(in), err))
	}
	return out.ETag, nil
}

// streams reports whether a Put of size bytes goes as one streamed
// PutObject (see Options.SinglePutMax).
func (b *Backend) streams(size int64, opts storage.PutOptions) bool {
	return size > b.partSize && size <= b.singlePutMax && opts.SHA256 != ""
}

// putsWhole reports whether a Put of size bytes is one PutObject (which a
// stage cannot hold back without holding the bytes).
func (b *Backend) putsWhole(size int64, opts storage.PutOptions) bool {
	return size >= 0 && size <= b.partSize || b.streams(size, opts)
}

// putStream sends the object as one PutObject whose body is the source
// itself: no buffer, and signed with the object's sha256, so the client
// hashes nothing for the signature. checkedReader holds back the last
// bytes until the source has ended and checked out, so a wrong source
// never completes the request. The SDK cannot resend a stream: a
// transient failure fails the Put (the caller retries it whole).
func (b *Backend) putStream(ctx context.Context, in *s3.PutObjectInput, body *checkedReader, size int64) (*string, error) {
	in.Body = body
	in.ContentLength = aws.Int64(size)

	// One attempt: a stream cannot be rewound, and the SDK's retry would
	// report that instead of the failure itself.
	once := func(o *s3.Options) { o.Retryer = retry.AddWithMaxAttempts(o.Retryer, 1) }
	out, err := b.client.PutObject(ctx, in, withPayloadHash(in.Metadata[metaSHA256]), once)
	if err != nil {
		if body.err != nil && body.err != io.EOF { // the source's own error, not the transport's account of it
			return nil, fmt.Errorf("put %s: %w", body.where, body.err)
		}
		return nil, b.settleLostAnswer(ctx, in, body.n < size, b.wrapPut(*in.Key, conditional(in), err))
	}
	return out.ETag, nil
}

// settleLostAnswer decides a conditional put that failed without an
// answer (err is ErrUnavailable): a server that refuses the condition may
// answer 412 early and close the connection while the body is still being
// sent, which the client sees as a reset. A HEAD then tells: when the
// condition no longer holds and the object is not this write's (its
// sha256 differs, or the body never went out whole, so the write cannot
// have landed), the put lost the race: ErrConflict. Otherwise err stands.
func (b *Backend) settleLostAnswer(ctx context.Context, in *s3.PutObjectInput, cutShort bool, err error) error {
	if !conditional(in) || !errors.Is(err, storage.ErrUnavailable) || ctx.Err() != nil {
		return err
	}
	head, herr := b.head(ctx, "put", *in.Key)
	var holds bool
	switch {
	case errors.Is(herr, storage.ErrNotExist):
		holds = in.IfNoneMatch != nil
	case herr != nil:
		return err
	case in.IfMatch != nil:
		holds = aws.ToString(head.ETag) == aws.ToString(in.IfMatch)
	}
	if holds {
		return err
	}
	ours := herr == nil && !cutShort && metaValue(head.Metadata, metaSHA256) == in.Metadata[metaSHA256]
	if ours {
		return err
	}
	return fmt.Errorf("s3 put s3://%s/%s: the object changed since it was planned (the server closed the connection mid-body): %w", b.bucket, *in.Key, storage.ErrConflict)
}

// putMultipart streams an object of unknown size or over PartSize through
// the uploader and returns its ETag; a failed upload is aborted.
func (b *Backend) putMultipart(ctx context.Context, in *s3.PutObjectInput, body *checkedReader, size int64) (*string, error) {
	// The uploader sees a plain io.Reader and buffers parts from its pool.
	in.Body = body
	partSize := b.partSize
	if size/partSize >= int64(maxUploadParts) {
		// S3 allows 10,000 parts: a known large size gets larger parts.
		partSize = size/int64(maxUploadParts) + 1
	}
	weight := min(b.budget, int64(b.concurrency+partsBesideConcurrency)*partSize)
	if err := b.mem.acquire(ctx, weight); err != nil {
		return nil, fmt.Errorf("put %s: %w", body.where, err)
	}
	defer b.mem.release(weight)
	out, err := b.uploader.UploadObject(ctx, &transfermanager.UploadObjectInput{Bucket: in.Bucket, Key: in.Key, Body: in.Body,
		ContentType: in.ContentType, Metadata: in.Metadata, IfMatch: in.IfMatch, IfNoneMatch: in.IfNoneMatch}, func(o *transfermanager.Options) {
		o.PartSizeBytes = partSize
		o.Concurrency = b.concurrency
	})
	if err != nil {
		// The transfer manager's own abort runs on the caller's context,
		// so a cancelled Put leaves its parts (v0.5.9): abort it here
		// too, and keep the cancellation in the chain (it is only text).
		var mf transfermanager.MultipartUploadError
		failed := errors.As(err, &mf) && mf.UploadID() != ""
		if cerr := ctx.Err(); cerr != nil && !errors.Is(err, cerr) {
			err = fmt.Errorf("%w: %v", cerr, err)
		}
		err = b.wrapPut(*in.Key, conditional(in), err)
		if failed {
			err = b.abortAfter(ctx, *in.Key, mf.UploadID(), err)
		}
		return nil, err
	}
	return out.ETag, nil
}

// conditional reports whether a put carries a condition the server checks.
func conditional(in *s3.PutObjectInput) bool {
	return in.IfNoneMatch != nil || in.IfMatch != nil
}

// wrapPut maps a failed conditional write (412, or 409 for a concurrent
// conditional write on AWS) to ErrConflict.
func (b *Backend) wrapPut(key string, conditional bool, err error) error {
	if s := httpStatus(err); conditional && (s == 412 || s == 409 || (s == 404 && apiCode(err) != "NoSuchBucket")) {
		return fmt.Errorf("s3 put s3://%s/%s: the object changed since it was planned: %w", b.bucket, key, storage.ErrConflict)
	}
	return b.wrap("put", key, err)
}

// abortAfter aborts a multipart upload that failed with err, and says
// so in the error when the abort fails too.
func (b *Backend) abortAfter(ctx context.Context, key, uploadID string, err error) error {
	if aerr := b.abort(ctx, key, uploadID); aerr != nil {
		return fmt.Errorf("%w (and the abort of multipart upload %s failed: %v; a bucket lifecycle rule for incomplete multipart uploads removes its parts)", err, uploadID, aerr)
	}
	return err
}

// abort aborts a multipart upload until it stays gone: a part the server
// was still receiving when the abort came may land after it and bring
// the upload back (versitygw's posix backend does; AWS documents the same
// and advises aborting again until ListParts finds no upload).
func (b *Backend) abort(ctx context.Context, key, uploadID string) error {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), abortTimeout)
	defer cancel()
	const attempts = 4
	for attempt := range attempts {
		_, err := b.client.AbortMultipartUpload(ctx, &s3.AbortMultipartUploadInput{Bucket: &b.bucket, Key: &key, UploadId: &uploadID})
		if err != nil && httpStatus(err) != 404 { // 404: already gone
			return err
		}
		gone, err := b.uploadGone(ctx, key, uploadID)
		if err != nil || gone {
			return err
		}
		select {
		case <-time.After(abortRecheck << attempt):
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return fmt.Errorf("multipart upload %s is still there after %d aborts", uploadID, attempts)
}

// abortRecheck is the first wait before an upload that came back after
// its abort is aborted again; it doubles each time.
const abortRecheck = 50 * time.Millisecond

// uploadGone reports whether the server no longer knows the upload.
func (b *Backend) uploadGone(ctx context.Context, key, uploadID string) (bool, error) {
	_, err := b.client.ListParts(ctx, &s3.ListPartsInput{Bucket: &b.bucket, Key: &key, UploadId: &uploadID})
	switch {
	case err == nil:
		return false, nil
	case httpStatus(err) == 404 || apiCode(err) == "NoSuchUpload":
		return true, nil
	}
	return false, err
}

// checkedReader hashes and counts what passes through and turns EOF into
// an error when the size or digest is not the promised one, so that the
// upload fails before it completes. It also stops on cancellation.
type checkedReader struct {
	ctx   context.Context
	r     io.Reader
	size  int64
	want  []byte
	h     hash.Hash // nil when no digest is expected
	n     int64
	where string
	err   error
}

func (c *checkedReader) Read(p []byte) (int, error) {
	if c.err != nil {
		return 0, c.err
	}
	if err := c.ctx.Err(); err != nil {
		c.err = err
		return 0, err
	}
	n, err := c.r.Read(p)
	c.n += int64(n)
	if c.h != nil {
		c.h.Write(p[:n])
	}
	if err == nil && n > 0 && c.size >= 0 && c.n == c.size {
		// The last announced byte: a transport stops reading here and the
		// server then has the whole body, so see the source end (and its
		// digest checked) before handing these bytes over.
		err = c.probeEnd()
	}
	switch {
	case c.size >= 0 && c.n > c.size:
		err = fmt.Errorf("source has more than the announced %d bytes", c.size)
	case err == io.EOF && c.size >= 0 && c.n != c.size:
		err = fmt.Errorf("source ended after %d of the announced %d bytes", c.n, c.size)
	case err == io.EOF && c.want != nil:
		if got := c.h.Sum(nil); !bytes.Equal(got, c.want) {
			err = fmt.Errorf("content sha256:%x does not match the expected sha256:%x", got, c.want)
		}
	case err != nil && err != io.EOF:
		err = fmt.Errorf("read source: %w", err)
	}
	if err != nil {
		c.err = err
		if err != io.EOF {
			return 0, err // withheld: the request must not complete with them
		}
	}
	return n, err
}

// probeEnd reads past the announced size: io.EOF when the source ends
// there (a verifying source checked its digest on the way), else the
// source's error or a byte too many (counted, so Read reports it).
func (c *checkedReader) probeEnd() error {
	var one [1]byte
	for range 100 { // a Read may return nothing and no error; not forever
		m, err := c.r.Read(one[:])
		c.n += int64(m)
		if m > 0 || err != nil {
			if m > 0 && err == nil {
				err = errors.New("more bytes") // replaced by the size check
			}
			return err
		}
	}
	return io.ErrNoProgress
}

// Delete removes the objects with DeleteObjects, 1000 keys a request;
// missing keys are fine. Every key that failed is named in the error.
func (b *Backend) Delete(ctx context.Context, paths ...string) error {
	seen := make(map[string]bool, len(paths))
	var keys []types.ObjectIdentifier
	for _, p := range paths {
		key, err := b.key(p)
		if err != nil {
			return err
		}
		if !seen[key] {
			seen[key] = true
			keys = append(keys, types.ObjectIdentifier{Key: aws.String(key)})
		}
	}
	var errs []error
	for len(keys) > 0 {
		batch := keys[:min(len(keys), maxDeleteBatch)]
		keys = keys[len(batch):]
		out, err := b.client.DeleteObjects(ctx, &s3.DeleteObjectsInput{
			Bucket: &b.bucket,
			Delete: &types.Delete{Objects: batch, Quiet: aws.Bool(true)},
		})
		if err != nil {
			return errors.Join(append(errs, b.wrap(fmt.Sprintf("delete %d objects, first", len(batch)), aws.ToString(batch[0].Key), err))...)
		}
		for _, e := range out.Errors {
			code, msg := aws.ToString(e.Code), aws.ToString(e.Message)
			err := fmt.Errorf("s3 delete s3://%s/%s: %s: %s", b.bucket, aws.ToString(e.Key), code, msg)
			if _, ok := retry.DefaultThrottleErrorCodes[code]; ok || code == "InternalError" || code == "ServiceUnavailable" {
				err = fmt.Errorf("%w: %w", err, storage.ErrUnavailable)
			}
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// List calls fn for the objects whose path starts with prefix ("" = the
// whole root; "a/" = the folder a; "a" also matches "ab") in key order,
// which is path order. ObjectInfo.SHA256 is left empty (listing does not
// return metadata; Stat has it). Folder markers (keys ending in "/") and
// keys that are not valid paths are skipped: they cannot be outputs.
func (b *Backend) List(ctx context.Context, prefix string, fn func(storage.ObjectInfo) error) error {
	if p := strings.TrimSuffix(prefix, "/"); p != "" {
		if err := catalog.ValidatePath(p); err != nil {
			return fmt.Errorf("list %s: %w", b, err)
		}
	}
	full := b.prefix + prefix
	in := &s3.ListObjectsV2Input{Bucket: &b.bucket, Prefix: aws.String(full)}
	for {
		page, err := b.listPage(ctx, in)
		if err != nil {
			return b.wrap("list", full, err)
		}
		for _, o := range page.objects {
			p, ok := strings.CutPrefix(o.key, b.prefix)
			if !ok || strings.HasSuffix(p, "/") || catalog.ValidatePath(p) != nil {
				continue
			}
			if err := fn(storage.ObjectInfo{Path: p, Size: o.size, ModTime: o.modTime, Fingerprint: o.etag}); err != nil {
				return err
			}
		}
		if !page.truncated || page.next == "" {
			return nil
		}
		in.ContinuationToken = aws.String(page.next)
	}
}

// listPage sends one ListObjectsV2 request; its body is read by fastList
// when it can, by the SDK otherwise.
func (b *Backend) listPage(ctx context.Context, in *s3.ListObjectsV2Input) (listPage, error) {
	var page listPage
	out, err := b.client.ListObjectsV2(ctx, in, func(o *s3.Options) {
		o.APIOptions = append(o.APIOptions, withFastList(&page))
	})
	if err != nil || page.ok {
		return page, err
	}
	page = listPage{truncated: aws.ToBool(out.IsTruncated), next: aws.ToString(out.NextContinuationToken)}
	for _, o := range out.Contents {
		page.objects = append(page.objects, listedObject{key: aws.ToString(o.Key), etag: aws.ToString(o.ETag),
			size: aws.ToInt64(o.Size), modTime: aws.ToTime(o.LastModified)})
	}
	return page, nil
}

// ReadVersion reads the whole object and its ETag, the version that
// WriteIfVersion and DeleteIfVersion compare against.
func (b *Backend) ReadVersion(ctx context.Context, p string, _ ...storage.Option) ([]byte, storage.Version, error) {
	key, err := b.key(p)
	if err != nil {
		return nil, "", err
	}
	out, err := b.client.GetObject(ctx, &s3.GetObjectInput{Bucket: &b.bucket, Key: &key})
	if err != nil {
		err = b.wrap("read", key, err)
		if errors.Is(err, storage.ErrNotExist) {
			return nil, "", nil
		}
		return nil, "", err
	}
	defer out.Body.Close()
	data, err := readSized(out.Body, aws.ToInt64(out.ContentLength))
	if err != nil {
		return nil, "", b.wrap("read", key, err)
	}
	etag := aws.ToString(out.ETag)
	if etag == "" {
		return nil, "", fmt.Errorf("s3 read s3://%s/%s: the server returned no ETag, which compare-and-swap needs", b.bucket, key)
	}
	return data, storage.Version(etag), nil
}

// readSized reads r to its end into a buffer of the size announced (a
// response's Content-Length; 0 or less: unknown): io.ReadAll grows a
// catalog of megabytes through a score of copies. A body longer than
// announced is still read whole.
func readSized(r io.Reader, size int64) ([]byte, error) {
	if size <= 0 || size > 1<<30 {
		return io.ReadAll(r)
	}
	b := make([]byte, 0, size+1) // +1: the read that meets the end needs room
	for {
		n, err := r.Read(b[len(b):cap(b)])
		b = b[:len(b)+n]
		if err == io.EOF {
			return b, nil
		}
		if err != nil {
			return nil, err
		}
		if len(b) == cap(b) {
			b = append(b, 0)[:len(b)] // longer than announced: grow
		}
	}
}

// WriteIfVersion is a compare-and-swap PutObject: If-None-Match "*" when
// want is "", If-Match want otherwise. A lost race is ErrConflict.
func (b *Backend) WriteIfVersion(ctx context.Context, p string, data []byte, want storage.Version, _ ...storage.Option) (storage.Version, error) {
	return b.writeIfVersion(ctx, p, io.NewSectionReader(bytes.NewReader(data), 0, int64(len(data))), sha256.Sum256(data), want)
}

// writeIfVersion is WriteIfVersion of data whose sha256 is sum.
func (b *Backend) writeIfVersion(ctx context.Context, p string, body *io.SectionReader, sum [sha256.Size]byte, want storage.Version) (storage.Version, error) {
	key, err := b.key(p)
	if err != nil {
		return "", err
	}
	in := &s3.PutObjectInput{
		Bucket:        &b.bucket,
		Key:           &key,
		Body:          body,
		ContentLength: aws.Int64(body.Size()),
		Metadata:      map[string]string{metaSHA256: catalog.Digest(sum[:])},
	}
	if ct := mime.TypeByExtension(path.Ext(p)); ct != "" {
		in.ContentType = aws.String(ct)
	}
	if want == "" {
		in.IfNoneMatch = aws.String("*")
	} else {
		in.IfMatch = aws.String(string(want))
	}

	// Signed with the sum just taken: the SDK would hash the data again.
	out, err := b.client.PutObject(ctx, in, withPayloadHash(in.Metadata[metaSHA256]))
	if err != nil {
		// 412 PreconditionFailed, 409 ConditionalRequestConflict (AWS, a
		// concurrent write), and for If-Match 404 (AWS, versitygw: the
		// object is gone; gofakes3 says 412).
		if s := httpStatus(err); s == 412 || s == 409 || (want != "" && s == 404 && apiCode(err) != "NoSuchBucket") {
			return "", fmt.Errorf("s3 write s3://%s/%s: %w", b.bucket, key, storage.ErrConflict)
		}
		return "", b.wrap("write", key, err)
	}
	b.bucketSeen.Store(true)
	etag := aws.ToString(out.ETag)
	if etag == "" {
		return "", fmt.Errorf("s3 write s3://%s/%s: the server returned no ETag, which compare-and-swap needs", b.bucket, key)
	}
	return storage.Version(etag), nil
}

// DeleteIfVersion deletes the object only if its ETag is want (want "" =
// the object must be missing, and then there is nothing to delete). It
// compares the current ETag first, then deletes with If-Match: servers that
// honour If-Match on DeleteObject (AWS) close the race; servers that ignore
// it (gofakes3) leave a small window between the check and the delete in
// which another writer's new version could be deleted. Callers hold the
// root's lease, so that window needs a second writer that bypasses it.
func (b *Backend) DeleteIfVersion(ctx context.Context, p string, want storage.Version, _ ...storage.Option) error {
	key, err := b.key(p)
	if err != nil {
		return err
	}
	conflict := fmt.Errorf("s3 delete s3://%s/%s: %w", b.bucket, key, storage.ErrConflict)
	head, err := b.head(ctx, "delete", key)
	if err != nil {
		if errors.Is(err, storage.ErrNotExist) {
			if want == "" {
				return nil
			}
			return conflict
		}
		return err
	}
	if want == "" || storage.Version(aws.ToString(head.ETag)) != want {
		return conflict
	}
	in := &s3.DeleteObjectInput{Bucket: &b.bucket, Key: &key, IfMatch: aws.String(string(want))}
	_, err = b.client.DeleteObject(ctx, in)
	if s := httpStatus(err); s == 501 || apiCode(err) == "NotImplemented" {
		in.IfMatch = nil // a server that refuses the header: plain delete after the check
		_, err = b.client.DeleteObject(ctx, in)
	}
	if err != nil {
		if s := httpStatus(err); s == 412 || s == 409 || (s == 404 && apiCode(err) != "NoSuchBucket") {
			return conflict
		}
		return b.wrap("delete", key, err)
	}
	return nil
}

// wrap names the object and maps SDK errors to the storage sentinels.
func (b *Backend) wrap(op, key string, err error) error {
	where := "s3://" + b.bucket + "/" + key
	var nf *types.NotFound
	var nk *types.NoSuchKey
	var te *TimeoutError
	switch code := apiCode(err); {
	case errors.As(err, &te): // before the context check: a header timeout Is DeadlineExceeded
		return fmt.Errorf("s3 %s %s: S3 endpoint %s %s: %w: %w", op, where, b.endpoint, te, storage.ErrUnavailable, err)
	case errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded):
		return fmt.Errorf("s3 %s %s: %w", op, where, err)
	case noCredentials(err):
		return fmt.Errorf("s3 %s %s: %s: %w", op, where, NoCredentialsHint, err)
	case code == "NoSuchBucket":
		return fmt.Errorf("s3 %s %s: %w", op, where, b.noBucket())
	case errors.As(err, &nf) || errors.As(err, &nk) || code == "NoSuchKey" || code == "NotFound":
		return fmt.Errorf("s3 %s %s: %w", op, where, storage.ErrNotExist)
	case httpStatus(err) == 403 || code == "AccessDenied":
		return fmt.Errorf("s3 %s %s: %w: check the AWS credentials and the bucket policy: %w", op, where, storage.ErrDenied, err)
	case isTransient(err):
		return fmt.Errorf("s3 %s %s at %s: %w: %w", op, where, b.endpoint, storage.ErrUnavailable, err)
	}
	return fmt.Errorf("s3 %s %s: %w", op, where, err)
}

// NoCredentialsHint says how to give the SDK credentials.
const NoCredentialsHint = "no AWS credentials found: set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, or AWS_PROFILE (a profile in ~/.aws/credentials), or run with an IAM role"

// noCredentials reports the SDK's failure to find credentials: the chain's
// last provider's error, wrapped in text only (the SDK has no type for it).
func noCredentials(err error) bool {
	return strings.Contains(err.Error(), "get identity: get credentials: ")
}

func apiCode(err error) string {
	var ae smithy.APIError
	if errors.As(err, &ae) {
		return ae.ErrorCode()
	}
	return ""
}

func httpStatus(err error) int {
	var re *awshttp.ResponseError
	if errors.As(err, &re) {
		return re.HTTPStatusCode()
	}
	return 0
}

// isTransient reports failures that may pass if tried later, once the
// SDK's own retries are spent: no response, 5xx, throttling.
func isTransient(err error) bool {
	if err == nil {
		return false
	}
	if s := httpStatus(err); s >= 500 || s == 429 {
		return true
	}
	if _, ok := retry.DefaultThrottleErrorCodes[apiCode(err)]; ok {
		return true
	}
	switch apiCode(err) {
	case "RequestTimeout", "InternalError", "ServiceUnavailable":
		return true
	}
	var send *smithyhttp.RequestSendError
	var ne net.Error
	var quota ratelimit.QuotaExceededError
	return errors.As(err, &send) || errors.As(err, &ne) || errors.As(err, &quota) ||
		errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.ECONNREFUSED)
}
