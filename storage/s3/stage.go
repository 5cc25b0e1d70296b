package s3

// Staged writes (storage.Stage). A publication stages every output,
// hashing the bundle's bytes as they pass, and names them only once all
// are verified, so a damaged bundle leaves nothing visible:
//
//   - An object of up to stageSmallMax bytes is read into memory (checked)
//     and sent with one conditional PutObject at Commit, while the
//     Backend's share for staged objects (MemoryBudget/4) lasts.
//   - An object that Backend.Put sends as one PutObject (up to PartSize,
//     or with its SHA256 known up to SinglePutMax, 256 MiB by default) is
//     read and checked to its end, and kept as its source alone: Commit
//     sends it with Backend.Put, reading its bytes again. A multipart upload would hold no memory and
//     read them once, but its completion is where gofakes3 (the bench
//     server) copies and hashes the whole object again, one upload at a
//     time, which makes large bundles about twice as slow as PutObjects
//     (docs/benchmarks.md). On AWS a completion is cheap either way.
//   - A larger one with its SHA256 known goes at Put as the parts of a
//     multipart upload, Concurrency at once, each from a buffer of the
//     memory budget and signed with its own sha256 (parts.go). Parts stay
//     invisible until CompleteMultipartUpload, which Commit sends with the
//     write's condition, after checking it with a HEAD: gofakes3 ignores
//     conditions on completion (AWS honours them).
//   - Anything else (no digest, no staging memory left) is read and
//     checked to its end, and sent from its source again at Commit.
//
// gofakes3 answers CompleteMultipartUpload with the multipart-style ETag
// ("<md5 of the part md5s>-<parts>") but lists and HEADs the object with the
// MD5 of its bytes; AWS returns the same ETag everywhere. On gofakes3 the
// fingerprint recorded at commit thus does not vouch for the object on
// the next publication, which reads its sha256 metadata once (a HEAD)
// and records the listed ETag: correct, one request more per large object.

import (
	"bytes"
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"sync"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/aws/smithy-go/middleware"
	smithyhttp "github.com/aws/smithy-go/transport/http"

	"github.com/distributor/distributor/catalog"
	"github.com/distributor/distributor/storage"
)

const (
	// stageSmallMax: objects up to this size are staged in memory (one
	// request at Commit).
	stageSmallMax = 1 << 20
)

// Stage begins a set of staged writes.
func (b *Backend) Stage(context.Context) storage.Stage {
	return &stage{b: b, objs: map[string]*stagedObject{}}
}

type stage struct {
	b    *Backend
	mu   sync.Mutex
	objs map[string]*stagedObject
}

// stagedObject is one staged write: data (small) or an upload (large).
type stagedObject struct {
	path, key string
	size      int64
	opts      storage.PutOptions
	data      []byte // small: the checked bytes (held from the share)
	held      int64
	src       storage.Source // neither: read again and sent whole at Commit
	uploadID  string         // large: the multipart upload and its parts
	parts     []types.CompletedPart
	committed bool
}

// Put stages one object (see the file comment). The ObjectInfo has no
// Fingerprint: Commit returns it.
func (s *stage) Put(ctx context.Context, p string, src storage.Source, size int64, opts storage.PutOptions) (storage.ObjectInfo, error) {
	key, err := s.b.key(p)
	if err != nil {
		return storage.ObjectInfo{}, err
	}
	r, err := src(ctx)
	if err != nil {
		return storage.ObjectInfo{}, err
	}
	defer r.Close()
	body, err := s.b.checked(p, r, size, opts)
	if err != nil {
		return storage.ObjectInfo{}, err
	}
	body.ctx = ctx
	o := &stagedObject{path: p, key: key, size: size, opts: opts}
	switch {
	case size >= 0 && size <= stageSmallMax && s.b.mem.tryStage(size):
		o.held = size
		err = s.readSmall(o, body)
	case size > stageSmallMax && opts.SHA256 != "" && !s.b.putsWhole(size, opts):
		err = s.uploadParts(ctx, o, body)
	default:
		// Checked to its end now, sent from src again at Commit.
		if _, err = io.Copy(io.Discard, body); err != nil {
			err = fmt.Errorf("stage %s%s: %w", s.b, p, err)
		}
		o.src = src
	}
	if err != nil {
		return storage.ObjectInfo{}, err
	}
	s.mu.Lock()
	old := s.objs[p]
	s.objs[p] = o
	s.mu.Unlock()
	if old != nil && !old.committed { // a second Put of one path replaces the first
		if err := s.discard(ctx, old); err != nil {
			return storage.ObjectInfo{}, err
		}
	}
	return storage.ObjectInfo{Path: p, Size: size, SHA256: opts.SHA256}, nil
}

// readSmall reads a small object into memory, checked: exactly its size
// (no spare byte that would round the allocation up), then its end.
func (s *stage) readSmall(o *stagedObject, body *checkedReader) error {
	data := make([]byte, o.size)
	_, err := io.ReadFull(body, data)
	if err == nil {
		var one [1]byte
		if _, err = io.ReadFull(body, one[:]); err == io.EOF {
			err = nil // checkedReader checked the size and digest at EOF
		} else if err == nil {
			err = body.err
		}
	}
	if err != nil {
		s.release(o)
		return fmt.Errorf("stage %s: %w", body.where, err)
	}
	o.data = data
	return nil
}

// withPayloadHash signs a request with the given sha256 ("sha256:<hex>")
// as its payload hash instead of hashing the body, over plain http (over
// https the SDK sends the payload unsigned and hashes nothing anyway).
// Only for bodies checked against that digest.
func withPayloadHash(digest string) func(*s3.Options) {
	sum, _ := catalog.DigestSum(digest)
	if len(sum) == 0 {
		return func(*s3.Options) {}
	}
	return withPayloadHashHex(hex.EncodeToString(sum))
}

// withPayloadHashHex is withPayloadHash for a hex sha256.
func withPayloadHashHex(h string) func(*s3.Options) {
	return func(o *s3.Options) {
		o.APIOptions = append(o.APIOptions, func(st *middleware.Stack) error {
			return st.Finalize.Add(middleware.FinalizeMiddlewareFunc("distributorPayloadHash",
				func(ctx context.Context, in middleware.FinalizeInput, next middleware.FinalizeHandler) (middleware.FinalizeOutput, middleware.Metadata, error) {
					if req, ok := in.Request.(*smithyhttp.Request); ok && !req.IsHTTPS() {
						ctx = v4.SetPayloadHash(ctx, h)
					}
					return next.HandleFinalize(ctx, in)
				}), middleware.Before)
		})
	}
}

// Commit makes the staged object visible, under its Put's condition.
// Commit commits and returns the object's info, with its ETag.
func (s *stage) Commit(ctx context.Context, p string) (storage.ObjectInfo, error) {
	s.mu.Lock()
	o := s.objs[p]
	if o == nil || o.committed {
		s.mu.Unlock()
		return storage.ObjectInfo{}, fmt.Errorf("commit %s%s: nothing staged at this path", s.b, p)
	}
	o.committed = true // one Commit per path; a failed one is not retried
	s.mu.Unlock()
	var etag string
	var err error
	switch {
	case o.src != nil:
		etag, err = s.commitWhole(ctx, o)
	case o.uploadID == "":
		etag, err = s.commitSmall(ctx, o)
	default:
		etag, err = s.complete(ctx, o)
	}
	if err != nil {
		// Not retried: drop the upload now (Close skips committed ones).
		if derr := s.discard(context.WithoutCancel(ctx), o); derr != nil {
			err = fmt.Errorf("%w (%v)", err, derr)
		}
		return storage.ObjectInfo{}, err
	}
	return storage.ObjectInfo{Path: p, Size: o.size, SHA256: o.opts.SHA256, Fingerprint: etag}, nil
}

// commitSmall sends a small staged object with one conditional PutObject.
func (s *stage) commitSmall(ctx context.Context, o *stagedObject) (string, error) {
	defer s.release(o)
	in := putInput(s.b, o.key, o.opts)
	body := o.data
	in.Body = bytes.NewReader(body)
	in.ContentLength = aws.Int64(int64(len(body)))
	var optFns []func(*s3.Options)
	if o.opts.SHA256 != "" {
		optFns = append(optFns, withPayloadHash(o.opts.SHA256))
	}
	out, err := s.b.client.PutObject(ctx, in, optFns...)
	if err != nil {
		return "", s.b.wrapPut(o.key, conditional(in), err)
	}
	return aws.ToString(out.ETag), nil
}

// commitWhole sends an object staged by its source alone: Backend.Put
// of its bytes, read again, under the write's condition.
func (s *stage) commitWhole(ctx context.Context, o *stagedObject) (string, error) {
	r, err := o.src(ctx)
	if err != nil {
		return "", err
	}
	defer r.Close()
	oi, err := s.b.Put(ctx, o.path, r, o.size, o.opts)
	return oi.Fingerprint, err
}

// complete checks the condition with a HEAD, then completes the upload
// with it (for servers that check it themselves, closing the window).
func (s *stage) complete(ctx context.Context, o *stagedObject) (string, error) {
	conflict := fmt.Errorf("s3 commit s3://%s/%s: the object changed since it was planned: %w", s.b.bucket, o.key, storage.ErrConflict)
	if o.opts.IfAbsent || o.opts.IfMatch != "" {
		head, err := s.b.head(ctx, "commit", o.key)
		switch {
		case errors.Is(err, storage.ErrNotExist):
			if o.opts.IfMatch != "" {
				return "", conflict
			}
		case err != nil:
			return "", err
		case o.opts.IfAbsent || aws.ToString(head.ETag) != o.opts.IfMatch:
			return "", conflict
		}
	}
	in := &s3.CompleteMultipartUploadInput{Bucket: &s.b.bucket, Key: &o.key, UploadId: &o.uploadID,
		MultipartUpload: &types.CompletedMultipartUpload{Parts: o.parts}}
	switch {
	case o.opts.IfAbsent:
		in.IfNoneMatch = aws.String("*")
	case o.opts.IfMatch != "":
		in.IfMatch = aws.String(o.opts.IfMatch)
	}
	out, err := s.b.client.CompleteMultipartUpload(ctx, in)
	if err != nil {
		return "", s.b.wrapPut(o.key, in.IfNoneMatch != nil || in.IfMatch != nil, err)
	}
	return aws.ToString(out.ETag), nil
}

// Close aborts the uploads not committed and frees the held memory.
func (s *stage) Close() error {
	s.mu.Lock()
	objs := s.objs
	s.objs = map[string]*stagedObject{}
	s.mu.Unlock()
	var errs []error
	for _, o := range objs {
		if !o.committed {
			errs = append(errs, s.discard(context.Background(), o))
		}
	}
	return errors.Join(errs...)
}

// discard drops one staged object: frees its memory, aborts its upload.
func (s *stage) discard(ctx context.Context, o *stagedObject) error {
	s.release(o)
	if o.uploadID == "" {
		return nil
	}
	if err := s.b.abort(ctx, o.key, o.uploadID); err != nil {
		return fmt.Errorf("abort staged upload %s of s3://%s/%s: %w", o.uploadID, s.b.bucket, o.key, err)
	}
	return nil
}

func (s *stage) release(o *stagedObject) {
	if o.held > 0 {
		s.b.mem.releaseStage(o.held)
		o.held, o.data = 0, nil
	}
}
