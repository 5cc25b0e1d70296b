// Package bundle reads and writes source bundles: a folder or S3 prefix
// holding manifest.json and the files it lists. Every byte read through a
// Bundle is checked against the manifest.
package bundle

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/google/renameio/v2/maybe"

	"github.com/distributor/distributor/catalog"
	"github.com/distributor/distributor/internal/ctxio"
	"github.com/distributor/distributor/internal/jsonfast"
	"github.com/distributor/distributor/internal/jsonkeys"
	"github.com/distributor/distributor/progress"
)

// ManifestName is the manifest's name at the top of a bundle.
const ManifestName = "manifest.json"

// SchemaVersion is the manifest schema this package reads and writes.
const SchemaVersion = 1

var (
	// ErrInvalidManifest: manifest.json breaks the manifest rules.
	ErrInvalidManifest = errors.New("invalid manifest")

	// ErrDigestMismatch: manifest.json is not the one the event announced.
	ErrDigestMismatch = errors.New("manifest digest does not match")

	// ErrContentMismatch: a file's bytes differ from the manifest (size or sha256).
	ErrContentMismatch = errors.New("file content does not match the manifest")

	// ErrMissingFile: a file the manifest lists is not in the bundle.
	ErrMissingFile = errors.New("file listed in the manifest is missing")

	// ErrNoManifest: the location holds no manifest.json.
	ErrNoManifest = errors.New("no manifest.json")

	// ErrNotListed: a path asked for is not in the manifest.
	ErrNotListed = errors.New("not listed in the manifest")

	// ErrBadLocation: a bundle location that is not an absolute path,
	// file:// or s3:// URL.
	ErrBadLocation = errors.New("bundle location")

	// ErrFutureCreated: the manifest's created time lies further past the
	// clock than the allowed skew; a producer's clock ran ahead.
	ErrFutureCreated = errors.New("bundle created in the future")
)

// CheckCreated refuses a created time more than maxSkew after now
// (ErrFutureCreated): newest wins by created, so a bundle stamped in the
// future would keep every correctly stamped version of its source off
// its paths. maxSkew <= 0 checks nothing.
func CheckCreated(created, now time.Time, maxSkew time.Duration) error {
	if maxSkew <= 0 || !created.After(now.Add(maxSkew)) {
		return nil
	}
	return fmt.Errorf("%w: created %s is later than this host's clock (%s) plus max_clock_skew (%s); fix the producer's clock and create the bundle again",
		ErrFutureCreated, created.UTC().Format(time.RFC3339Nano), now.UTC().Format(time.RFC3339), maxSkew)
}

// MaxIDBytes bounds a manifest's id: the id is in every catalog record
// and result event of the bundle's outputs.
const MaxIDBytes = 256

// CheckID refuses a manifest id that is empty, longer than MaxIDBytes or
// holds a control character (ids reach operators' terminals); the error
// wraps ErrInvalidManifest and names the field and the limit.
func CheckID(id string) error {
	switch {
	case strings.TrimSpace(id) == "":
		return invalid("id is missing or empty")
	case len(id) > MaxIDBytes:
		return invalid("id %q is %d bytes, over the limit of %d", head(id), len(id), MaxIDBytes)
	case hasControl(id):
		return invalid("id %q contains control characters, which are not allowed", id)
	}
	return nil
}

// hasControl reports whether s holds a control character (C0, DEL or C1)
// or bytes that are not UTF-8.
func hasControl(s string) bool {
	for _, c := range s {
		if unicode.IsControl(c) || c == utf8.RuneError {
			return true
		}
	}
	return false
}

// head is the start of s, to name an over-long value in a message.
func head(s string) string {
	const n = 32
	if len(s) <= n {
		return s
	}
	k := n
	for k > 0 && !utf8.RuneStart(s[k]) {
		k--
	}
	return s[:k] + "…"
}

// File is one manifest entry.
type File struct {
	Path   string `json:"path"`
	SHA256 string `json:"sha256"`
	Size   int64  `json:"size"`
}

// Manifest is the producer-to-distributor contract.
type Manifest struct {
	SchemaVersion int       `json:"schema_version"`
	ID            string    `json:"id"`
	Created       time.Time `json:"created"`
	Files         []File    `json:"files"`
}

// Digest is the source digest of manifest bytes: "sha256:" + hex of exactly
// these bytes.
func Digest(data []byte) string {
	sum := sha256.Sum256(data)
	return catalog.Digest(sum[:])
}

// The wire form uses pointers so that a missing field is told apart from a
// zero one.
type wireFile struct {
	Path   *string `json:"path"`
	SHA256 *string `json:"sha256"`
	Size   *int64  `json:"size"`
}

type wireManifest struct {
	SchemaVersion *int        `json:"schema_version"`
	ID            *string     `json:"id"`
	Created       *string     `json:"created"`
	Files         *[]wireFile `json:"files"`
}

func invalid(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrInvalidManifest}, args...)...)
}

// ParseManifest reads manifest bytes strictly: unknown fields, a key
// repeated in one object, a missing field, another schema_version, an empty
// id, a created time that is not RFC 3339, an invalid, reserved or duplicate
// path, a malformed sha256 or a negative size make an error wrapping
// ErrInvalidManifest that names the entry.
func ParseManifest(data []byte) (Manifest, error) {
	if m, ok := parseManifestFast(data); ok {
		return m, nil
	}
	return parseManifestReference(data)
}

// parseManifestFast reads a valid manifest without reflection (a million
// entries cost encoding/json seconds and five allocations each). It gives
// up on anything unusual or invalid, and parseManifestReference, the
// encoding/json reader, answers instead: whatever this accepts, that
// accepts the same way.
func parseManifestFast(data []byte) (Manifest, bool) {
	m, ok := jsonfast.Run(data, readManifest)
	if !ok || CheckID(m.ID) != nil {
		return Manifest{}, false
	}

	// Manifests list paths in order (Create sorts them): a repeat is then
	// next to its twin; only other orders need a set.
	var seen map[string]bool
	inOrder := slices.IsSortedFunc(m.Files, func(a, b File) int { return strings.Compare(a.Path, b.Path) })
	if !inOrder {
		seen = make(map[string]bool, len(m.Files))
	}
	for i, f := range m.Files {
		if checkFilePath(f.Path) != nil || !catalog.ValidDigest(f.SHA256) || f.Size < 0 {
			return Manifest{}, false
		}
		if inOrder && i > 0 && m.Files[i-1].Path == f.Path || seen[f.Path] {
			return Manifest{}, false
		}
		if !inOrder {
			seen[f.Path] = true
		}
	}
	return m, true
}

func readManifest(p *jsonfast.Parser) Manifest {
	m := Manifest{}
	var seen jsonfast.Keys
	once := seen.Once
	p.Object(func(key []byte) {
		switch string(key) {
		case "schema_version":
			once(0)
			if m.SchemaVersion = int(p.Int()); m.SchemaVersion != SchemaVersion {
				jsonfast.Fallback()
			}
		case "id":
			once(1)
			m.ID = p.Str()
		case "created":
			once(2)
			m.Created = p.Time(func(s string) (time.Time, error) { return time.Parse(time.RFC3339Nano, s) })
		case "files":
			once(3)

			// An entry is about 120 bytes written: size the slice once.
			m.Files = make([]File, 0, min(p.Len()/100+1, 1<<24))
			p.Array(func() { m.Files = append(m.Files, readFile(p)) })
		default:
			jsonfast.Fallback()
		}
	})
	if seen != 1<<4-1 { // every key is required
		jsonfast.Fallback()
	}
	return m
}

func readFile(p *jsonfast.Parser) File {
	var f File
	var seen jsonfast.Keys
	once := seen.Once
	p.Object(func(key []byte) {
		switch string(key) {
		case "path":
			once(0)
			f.Path = p.Str()
		case "sha256":
			once(1)
			f.SHA256 = p.Str()
		case "size":
			once(2)
			f.Size = p.Int()
		default:
			jsonfast.Fallback()
		}
	})
	if seen != 1<<3-1 { // every key is required
		jsonfast.Fallback()
	}
	return f
}

// parseManifestReference is ParseManifest through encoding/json: the
// reference for every input.
func parseManifestReference(data []byte) (Manifest, error) {
	var w wireManifest
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&w); err != nil {
		return Manifest{}, invalid("%v", err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return Manifest{}, invalid("trailing data after the JSON object")
	}

	// encoding/json keeps the last of repeated keys; which one the producer
	// meant cannot be known.
	if dup := jsonkeys.Duplicate(data); dup != nil {
		return Manifest{}, invalid("%v: the producer must write each key once per object", dup)
	}
	switch {
	case w.SchemaVersion == nil:
		return Manifest{}, invalid("schema_version is missing")
	case *w.SchemaVersion != SchemaVersion:
		return Manifest{}, invalid("schema_version %d is not supported (this distributor reads %d)", *w.SchemaVersion, SchemaVersion)
	case w.ID == nil:
		return Manifest{}, invalid("id is missing or empty")
	case w.Created == nil:
		return Manifest{}, invalid("created is missing")
	case w.Files == nil:
		return Manifest{}, invalid("files is missing")
	}
	if err := CheckID(*w.ID); err != nil {
		return Manifest{}, err
	}
	created, err := time.Parse(time.RFC3339Nano, *w.Created)
	if err != nil {
		return Manifest{}, invalid("created %q is not an RFC 3339 time (like 2026-06-19T12:00:00Z)", *w.Created)
	}
	m := Manifest{SchemaVersion: *w.SchemaVersion, ID: *w.ID, Created: created, Files: make([]File, 0, len(*w.Files))}
	seen := make(map[string]int, len(*w.Files))
	for i, wf := range *w.Files {
		if wf.Path == nil {
			return Manifest{}, invalid("files[%d]: path is missing", i)
		}
		f := File{Path: *wf.Path}
		if err := checkFilePath(f.Path); err != nil {
			return Manifest{}, fmt.Errorf("%w: files[%d]: %w", ErrInvalidManifest, i, err)
		}
		if j, dup := seen[f.Path]; dup {
			return Manifest{}, invalid("files[%d] %q: duplicate path (also files[%d])", i, f.Path, j)
		}
		seen[f.Path] = i
		switch {
		case wf.SHA256 == nil:
			return Manifest{}, invalid("files[%d] %q: sha256 is missing", i, f.Path)
		case !catalog.ValidDigest(*wf.SHA256):
			return Manifest{}, invalid("files[%d] %q: sha256 %q must be sha256:<64 lowercase hex>", i, f.Path, *wf.SHA256)
		case wf.Size == nil:
			return Manifest{}, invalid("files[%d] %q: size is missing", i, f.Path)
		case *wf.Size < 0:
			return Manifest{}, invalid("files[%d] %q: size %d is negative", i, f.Path, *wf.Size)
		}
		f.SHA256, f.Size = *wf.SHA256, *wf.Size
		m.Files = append(m.Files, f)
	}
	return m, nil
}

// checkFilePath: an output-able path that is not the manifest itself.
func checkFilePath(p string) error {
	if err := catalog.ValidateOutputPath(p); err != nil {
		return err
	}
	if p == ManifestName {
		return fmt.Errorf("%w %q: the manifest cannot list itself", catalog.ErrBadPath, p)
	}
	return nil
}

// Marshal returns the manifest's deterministic bytes: fields in schema
// order, two-space indent, created in UTC, trailing newline.
func (m Manifest) Marshal() ([]byte, error) {
	m.Created = m.Created.UTC()
	if m.Files == nil {
		m.Files = []File{}
	}
	data, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return nil, err
	}
	return append(data, '\n'), nil
}

// Create writes dir/manifest.json listing every regular file under dir
// (except manifest.json at the top), sorted by path, and returns it with its
// exact bytes. Symlinks and other non-regular files are refused, as are paths
// the manifest rules forbid. The manifest is replaced atomically. The same
// tree, id and time always give the same bytes.
func Create(ctx context.Context, dir, id string, created time.Time) (Manifest, []byte, error) {
	if strings.TrimSpace(id) == "" {
		return Manifest{}, nil, errors.New("bundle create: the source id is empty: pass --id")
	}
	if err := CheckID(id); err != nil {
		return Manifest{}, nil, fmt.Errorf("bundle create: %w", err)
	}
	if created.IsZero() {
		return Manifest{}, nil, errors.New("bundle create: the created time is zero")
	}
	m := Manifest{SchemaVersion: SchemaVersion, ID: id, Created: created.UTC(), Files: []File{}}
	progress.Start(ctx, "hashing", -1, -1) // counted while walking
	err := filepath.WalkDir(dir, func(name string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		rel, err := filepath.Rel(dir, name)
		if err != nil {
			return err
		}
		rel = filepath.ToSlash(rel)
		switch {
		case rel == ".":
			return nil
		case rel == ManifestName:
			return nil
		case d.Type()&fs.ModeSymlink != 0:
			return fmt.Errorf("%s is a symlink: bundles hold regular files only; copy the target in", name)
		case d.IsDir():
			return nil
		case !d.Type().IsRegular():
			return fmt.Errorf("%s is not a regular file (%s)", name, d.Type())
		}
		if err := checkFilePath(rel); err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		f, err := hashFile(ctx, name)
		if err != nil {
			return err
		}
		f.Path = rel
		m.Files = append(m.Files, f)
		progress.Add(ctx, 1, f.Size)
		return nil
	})
	if err != nil {
		return Manifest{}, nil, fmt.Errorf("bundle create %s: %w", dir, err)
	}

	// WalkDir orders by name per folder; the manifest orders whole paths.
	slices.SortFunc(m.Files, func(a, b File) int { return strings.Compare(a.Path, b.Path) })
	data, err := m.Marshal()
	if err != nil {
		return Manifest{}, nil, fmt.Errorf("bundle create %s: %w", dir, err)
	}
	if err := checkManifestSize(len(data), len(m.Files), MaxManifestSize); err != nil {
		return Manifest{}, nil, fmt.Errorf("bundle create %s: %w", dir, err)
	}

	// Replaced atomically (temp file, fsync, rename) where the system
	// allows it; on Windows written in place, where an interrupted create
	// leaves a manifest that ParseManifest refuses until create runs again.
	if err := maybe.WriteFile(filepath.Join(dir, ManifestName), data, 0o644); err != nil {
		return Manifest{}, nil, fmt.Errorf("bundle create %s: write %s: %w", dir, ManifestName, err)
	}
	return m, data, nil
}

// checkManifestSize refuses a manifest that Open would refuse to read.
func checkManifestSize(size, files, limit int) error {
	if size <= limit {
		return nil
	}
	return fmt.Errorf("%w: the manifest of %d files would take %d MiB, over the %d MiB a bundle's manifest may have; split the folder into several bundles",
		ErrInvalidManifest, files, (size+(1<<20)-1)>>20, limit>>20)
}

func hashFile(ctx context.Context, name string) (File, error) {
	f, err := os.Open(name)
	if err != nil {
		return File{}, err
	}
	defer f.Close()
	h := sha256.New()
	n, err := io.Copy(h, ctxio.Reader(ctx, f))
	if err != nil {
		return File{}, fmt.Errorf("read %s: %w", name, err)
	}
	return File{SHA256: catalog.Digest(h.Sum(nil)), Size: n}, nil
}
