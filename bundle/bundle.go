package bundle

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"hash"
	"io"
	"strings"
	"sync"
	"time"

	"github.com/distributor/distributor/catalog"
	"github.com/distributor/distributor/storage"
)

// MaxManifestSize bounds manifest.json: Open refuses a larger one rather
// than exhausting memory, and Create refuses to write one. A million
// entries with paths of 40 bytes take about 160 MiB.
const MaxManifestSize = 256 << 20

// Bundle is an opened bundle: its parsed manifest, the manifest's digest,
// and the store rooted at the bundle location.
type Bundle struct {
	Manifest Manifest
	Digest   string
	Location string

	store storage.Backend

	// index is built on the first lookup: a publication that copies
	// nothing (a republish of unchanged files) never looks one up.
	indexOnce sync.Once
	index     map[string]int
}

// Open reads and parses manifest.json from store. wantDigest "" accepts any
// manifest; otherwise the manifest's digest must equal it (ErrDigestMismatch).
// A created time more than maxClockSkew past the clock is refused
// (CheckCreated; 0 checks nothing, for tools that read bundles of any
// time). location names the bundle in messages (store.String() when
// empty).
func Open(ctx context.Context, store storage.Backend, location string, wantDigest string, maxClockSkew time.Duration) (*Bundle, error) {
	if location == "" {
		location = store.String()
	}
	rc, err := store.Open(ctx, ManifestName)
	if errors.Is(err, storage.ErrNotExist) {
		return nil, fmt.Errorf("bundle %s: %w: is this a bundle? write one with `distributor bundle create`", location, ErrNoManifest)
	}
	if err != nil {
		return nil, fmt.Errorf("bundle %s: read %s: %w", location, ManifestName, err)
	}
	defer rc.Close()
	data, err := readAll(rc, rc.Size)
	if err != nil {
		return nil, fmt.Errorf("bundle %s: read %s: %w", location, ManifestName, err)
	}
	if len(data) > MaxManifestSize {
		return nil, fmt.Errorf("bundle %s: %w: %s is larger than %d MiB", location, ErrInvalidManifest, ManifestName, MaxManifestSize>>20)
	}
	digest := Digest(data)
	if wantDigest != "" && digest != wantDigest {
		return nil, fmt.Errorf("bundle %s: %w: %s has %s, expected %s; the bundle changed after it was announced",
			location, ErrDigestMismatch, ManifestName, digest, wantDigest)
	}
	m, err := ParseManifest(data)
	if err != nil {
		return nil, fmt.Errorf("bundle %s: %w", location, err)
	}
	if err := CheckCreated(m.Created, time.Now(), maxClockSkew); err != nil {
		return nil, fmt.Errorf("bundle %s: %w", location, err)
	}
	return &Bundle{Manifest: m, Digest: digest, Location: location, store: store}, nil
}

// readAll reads up to MaxManifestSize+1 bytes of rc into one buffer sized
// by the size the store opened it with (known: -1 when not): growing by
// doubling copied a 10,000-file manifest several times over, into fresh
// pages each time.
func readAll(rc io.Reader, known int64) ([]byte, error) {
	size := int64(512)
	if known >= 0 {
		size = min(known, MaxManifestSize) + 1 // +1: the read that sees the end
	}
	r := io.LimitReader(rc, MaxManifestSize+1)
	buf := make([]byte, 0, size)
	for {
		if len(buf) == cap(buf) {
			buf = append(buf, 0)[:len(buf)] // more than its Stat said
		}
		n, err := r.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		if err == io.EOF {
			return buf, nil
		}
		if err != nil {
			return buf, err
		}
	}
}

// File returns the manifest entry for path.
func (b *Bundle) File(path string) (File, bool) {
	b.indexOnce.Do(func() {
		b.index = make(map[string]int, len(b.Manifest.Files))
		for i, f := range b.Manifest.Files {
			b.index[f.Path] = i
		}
	})
	i, ok := b.index[path]
	if !ok {
		return File{}, false
	}
	return b.Manifest.Files[i], true
}

func (b *Bundle) lookup(path string) (File, error) {
	f, ok := b.File(path)
	if !ok {
		return File{}, fmt.Errorf("bundle %s: %q: %w", b.Location, path, ErrNotListed)
	}
	return f, nil
}

func (b *Bundle) openStore(ctx context.Context, f File) (io.ReadCloser, error) {
	rc, err := b.store.Open(ctx, f.Path)
	if errors.Is(err, storage.ErrNotExist) {
		return nil, fmt.Errorf("bundle %s: %q: %w", b.Location, f.Path, ErrMissingFile)
	}
	if err != nil {
		return nil, fmt.Errorf("bundle %s: %w", b.Location, err)
	}
	return rc, nil
}

// Open streams a listed file. The bytes are hashed as they pass: a Read
// fails with an error wrapping ErrContentMismatch as soon as more bytes than
// the manifest's size arrive, and instead of io.EOF when the size or sha256
// differ. A consumer that copies the stream into storage.Put therefore never
// commits bytes the manifest does not vouch for.
func (b *Bundle) Open(ctx context.Context, path string) (io.ReadCloser, error) {
	f, err := b.lookup(path)
	if err != nil {
		return nil, err
	}
	rc, err := b.openStore(ctx, f)
	if err != nil {
		return nil, err
	}
	return &verifier{ctx: ctx, rc: rc, want: f, h: sha256.New(), location: b.Location}, nil
}

type verifier struct {
	ctx      context.Context
	rc       io.ReadCloser
	want     File
	h        hash.Hash
	n        int64
	location string
	err      error // sticky
}

func (v *verifier) mismatch(format string, args ...any) error {
	return fmt.Errorf("bundle %s: %q: %w: "+format, append([]any{v.location, v.want.Path, ErrContentMismatch}, args...)...)
}

func (v *verifier) Read(p []byte) (int, error) {
	if v.err != nil {
		return 0, v.err
	}
	if err := v.ctx.Err(); err != nil {
		return 0, err
	}
	n, err := v.rc.Read(p)
	v.h.Write(p[:n])
	v.n += int64(n)
	switch {
	case v.n > v.want.Size:
		v.err = v.mismatch("more than the manifest's %d bytes", v.want.Size)
		return 0, v.err // withhold the bytes: nothing past the size leaves
	case err == io.EOF:
		if v.n != v.want.Size {
			v.err = v.mismatch("%d bytes, the manifest says %d", v.n, v.want.Size)
			return 0, v.err
		}
		if got := catalog.Digest(v.h.Sum(nil)); got != v.want.SHA256 {
			v.err = v.mismatch("sha256 is %s, the manifest says %s", got, v.want.SHA256)
			return 0, v.err
		}
		v.err = io.EOF
		return n, io.EOF
	case err != nil:
		v.err = fmt.Errorf("bundle %s: read %q: %w", v.location, v.want.Path, err)
		return n, v.err
	}
	return n, nil
}

func (v *verifier) Close() error { return v.rc.Close() }

// ReadAll returns a listed file's verified bytes; for small files such as
// transform sources.
func (b *Bundle) ReadAll(ctx context.Context, path string) ([]byte, error) {
	rc, err := b.Open(ctx, path)
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	var buf bytes.Buffer
	if f, _ := b.File(path); f.Size < 64<<20 {
		buf.Grow(int(f.Size))
	}
	if _, err := buf.ReadFrom(rc); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// Report is the outcome of Verify.
type Report struct {
	// Files and Bytes count what was read and matched.
	Files int
	Bytes int64

	// Missing and Mismatched (size or sha256) list paths in manifest order.
	Missing    []string
	Mismatched []string
}

// OK reports whether every file was present and matched.
func (r Report) OK() bool { return len(r.Missing) == 0 && len(r.Mismatched) == 0 }

// Verify re-reads every listed file and compares it with the manifest. Any
// missing or damaged file makes an error wrapping ErrContentMismatch (and
// ErrMissingFile when files are missing); other errors (I/O, cancellation)
// stop the check and are returned with the report so far.
func (b *Bundle) Verify(ctx context.Context) (Report, error) {
	var rep Report
	for _, f := range b.Manifest.Files {
		rc, err := b.openStore(ctx, f)
		if errors.Is(err, ErrMissingFile) {
			rep.Missing = append(rep.Missing, f.Path)
			continue
		}
		if err != nil {
			return rep, err
		}
		v := &verifier{ctx: ctx, rc: rc, want: f, h: sha256.New(), location: b.Location}
		n, err := io.Copy(io.Discard, v)
		rc.Close()
		switch {
		case errors.Is(err, ErrContentMismatch):
			rep.Mismatched = append(rep.Mismatched, f.Path)
		case err != nil:
			return rep, err
		default:
			rep.Files++
			rep.Bytes += n
		}
	}
	if rep.OK() {
		return rep, nil
	}
	var problems []string
	for _, p := range rep.Missing {
		problems = append(problems, fmt.Sprintf("%q missing", p))
	}
	for _, p := range rep.Mismatched {
		problems = append(problems, fmt.Sprintf("%q damaged", p))
	}
	return rep, &verifyError{
		msg: fmt.Sprintf("bundle %s: %d of %d files do not match the manifest: %s",
			b.Location, len(problems), len(b.Manifest.Files), summarize(problems)),
		missing: len(rep.Missing) > 0,
	}
}

// verifyError is Verify's one-line summary; it matches ErrContentMismatch,
// and ErrMissingFile when files are missing.
type verifyError struct {
	msg     string
	missing bool
}

func (e *verifyError) Error() string { return e.msg }

func (e *verifyError) Is(target error) bool {
	return target == ErrContentMismatch || (e.missing && target == ErrMissingFile)
}

// summarize joins the first few items of a long list.
func summarize(items []string) string {
	const show = 5
	if len(items) <= show {
		return strings.Join(items, ", ")
	}
	return fmt.Sprintf("%s and %d more", strings.Join(items[:show], ", "), len(items)-show)
}

// CheckSizes is a cheap pre-flight (one Stat per file, no reading): every
// listed path exists with the manifest's size. paths nil means every file.
// Missing files give an error wrapping ErrMissingFile, other sizes one
// wrapping ErrContentMismatch.
func (b *Bundle) CheckSizes(ctx context.Context, paths []string) error {
	if paths == nil {
		for _, f := range b.Manifest.Files {
			paths = append(paths, f.Path)
		}
	}
	var missing, sized []string
	for _, p := range paths {
		f, err := b.lookup(p)
		if err != nil {
			return err
		}
		oi, err := b.store.Stat(ctx, p)
		switch {
		case errors.Is(err, storage.ErrNotExist):
			missing = append(missing, fmt.Sprintf("%q", p))
		case err != nil:
			return fmt.Errorf("bundle %s: %w", b.Location, err)
		case oi.Size != f.Size:
			sized = append(sized, fmt.Sprintf("%q has %d bytes, the manifest says %d", p, oi.Size, f.Size))
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("bundle %s: %w: %s", b.Location, ErrMissingFile, summarize(missing))
	}
	if len(sized) > 0 {
		return fmt.Errorf("bundle %s: %w: %s", b.Location, ErrContentMismatch, summarize(sized))
	}
	return nil
}
