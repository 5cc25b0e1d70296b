// Package catalog is the v4 current-state catalog (.distributor.json) that
// lives beside the outputs in every destination root: its types, a strict
// reader and a deterministic writer. The rules are in docs/catalog.md.
//
// # Large catalogs
//
// A catalog of a million records is half a gigabyte, and a publication
// mostly changes a few of them. Records written exactly as Marshal writes
// them (canonical) are read by a template scan, and a catalog read with
// ParseOwned remembers where each one's bytes are: Marshal copies the bytes
// of every record that still holds the values read, instead of validating
// and encoding it again.
package catalog

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sort"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/distributor/distributor/internal/jsonkeys"
)

// SchemaVersion is the only catalog version this distributor writes.
const SchemaVersion = 4

// ModeCatalog is the one value of state.mode in a v4 catalog.
const ModeCatalog = "catalog"

// Output kinds.
const (
	KindSource    = "source"
	KindGenerated = "generated"
)

var (
	// ErrInvalid marks a catalog that claims v4 but fails validation. Nothing
	// may overwrite it: an operator has to look.
	ErrInvalid = errors.New("invalid catalog")

	// ErrNewer marks a catalog written by a newer distributor (schema > 4).
	ErrNewer = errors.New("catalog written by a newer distributor")
)

// Catalog is the whole v4 document.
type Catalog struct {
	DistributorVersion string
	CreatedAt          time.Time
	UpdatedAt          time.Time
	Outputs            []Output // sorted by Path, unique

	// origin is set by ParseOwned (and carried by Successor): the bytes
	// the records were read from, for Marshal to copy unchanged ones.
	origin *origin
}

// InOrder reports whether the records are in path order (as Outputs must
// be). For the records as ParseOwned returned them (the same slice, read in
// order; records are never re-pathed in place) it is known without a pass:
// checking a million records again for each lookup table cost a pass each.
func (c *Catalog) InOrder() bool {
	if g := c.origin; g != nil && len(c.Outputs) > 0 && g.n == len(c.Outputs) && g.first == &c.Outputs[0] {
		return true
	}
	return sorted(c.Outputs)
}

// Successor returns an empty catalog with c's header, for building the
// catalog that follows c. Marshal copies the bytes of the records it keeps
// from c unchanged (when c was read by ParseOwned) instead of encoding them.
func (c *Catalog) Successor() *Catalog {
	return &Catalog{DistributorVersion: c.DistributorVersion, CreatedAt: c.CreatedAt, UpdatedAt: c.UpdatedAt, origin: c.origin}
}

// Source is the compact identity of the bundle that produced an output.
type Source struct {
	ID      string    `json:"id"`
	Digest  string    `json:"digest"`
	Created time.Time `json:"created"`
}

// Owner is the (pipeline, destination) pair that last wrote an output.
type Owner struct {
	PipelineID    string
	DestinationID string
}

func (o Owner) String() string { return o.PipelineID + "/" + o.DestinationID }

// Output is one managed output record.
type Output struct {
	Path          string
	PipelineID    string
	DestinationID string
	Source        Source
	Kind          string
	SourcePath    string // generated outputs only
	Transform     string // generated outputs only
	SHA256        string
	Size          int64
	CreatedAt     time.Time
	UpdatedAt     time.Time
	URL           string // only when links produce one
}

// Owner returns the record's owner.
func (o Output) Owner() Owner { return Owner{o.PipelineID, o.DestinationID} }

// SameContent reports whether two records agree on everything but their
// timestamps: when true, nothing about the output changed.
func (o Output) SameContent(p Output) bool {
	return o.Path == p.Path && o.PipelineID == p.PipelineID && o.DestinationID == p.DestinationID &&
		o.Source.ID == p.Source.ID && o.Source.Digest == p.Source.Digest && o.Source.Created.Equal(p.Source.Created) &&
		o.Kind == p.Kind && o.SourcePath == p.SourcePath && o.Transform == p.Transform &&
		o.SHA256 == p.SHA256 && o.Size == p.Size && o.URL == p.URL
}

// Lookup returns the record at path.
func (c *Catalog) Lookup(path string) (Output, bool) {
	i := sort.Search(len(c.Outputs), func(i int) bool { return c.Outputs[i].Path >= path })
	if i < len(c.Outputs) && c.Outputs[i].Path == path {
		return c.Outputs[i], true
	}
	return Output{}, false
}

// Finder returns a lookup of the records by path. For sorted outputs (every
// parsed catalog) it searches them in place; a map of a million records
// cost more than the whole plan.
func (c *Catalog) Finder() func(path string) (Output, bool) {
	if c.InOrder() {
		return c.Lookup
	}
	m := c.Index()
	return func(p string) (Output, bool) {
		o, ok := m[p]
		return o, ok
	}
}

// Ascending is Finder for paths asked in ascending order (a republish asks
// for most records, one after the other): a cursor steps through sorted
// records and searches only past a gap. A path asked out of order is
// searched as Finder does.
func (c *Catalog) Ascending() func(path string) (Output, bool) {
	if !c.InOrder() {
		return c.Finder()
	}
	outs, i := c.Outputs, 0
	return func(p string) (Output, bool) {
		if i > 0 && outs[i-1].Path >= p {
			return c.Lookup(p) // not ascending after all
		}
		for k := 0; i < len(outs) && outs[i].Path < p; k++ {
			if k == 4 {
				i += sort.Search(len(outs)-i, func(j int) bool { return outs[i+j].Path >= p })
				break
			}
			i++
		}
		if i < len(outs) && outs[i].Path == p {
			i++
			return outs[i-1], true
		}
		return Output{}, false
	}
}

// Index returns the records keyed by path.
func (c *Catalog) Index() map[string]Output {
	m := make(map[string]Output, len(c.Outputs))
	for _, o := range c.Outputs {
		m[o.Path] = o
	}
	return m
}

// Validate checks every rule of the v4 shape.
func (c *Catalog) Validate() error {
	_, err := c.validate()
	return err
}

// validate is Validate; it also says whether the records are in path
// order (a pass over a million records the caller need not repeat).
func (c *Catalog) validate() (inOrder bool, err error) {
	if err := c.validateHead(); err != nil {
		return false, err
	}

	// Sorted records (any parsed or written catalog) repeat a path next to
	// each other; only unsorted ones need a set.
	var seen map[string]bool
	inOrder = sorted(c.Outputs)
	if !inOrder {
		seen = make(map[string]bool, len(c.Outputs))
	}
	for i, o := range c.Outputs {
		if err := o.Validate(); err != nil {
			return false, fmt.Errorf("%w: outputs[%d]: %w", ErrInvalid, i, err)
		}
		if inOrder && i > 0 && c.Outputs[i-1].Path == o.Path || seen[o.Path] {
			return false, fmt.Errorf("%w: outputs[%d]: duplicate path %q", ErrInvalid, i, o.Path)
		}
		if !inOrder {
			seen[o.Path] = true
		}
	}
	return inOrder, nil
}

// validateHead checks the catalog's own fields (not its records).
func (c *Catalog) validateHead() error {
	if c.CreatedAt.IsZero() || c.UpdatedAt.IsZero() {
		return fmt.Errorf("%w: created_at and updated_at are required", ErrInvalid)
	}
	if err := writableTimes(c.CreatedAt, c.UpdatedAt); err != nil {
		return fmt.Errorf("%w: %v", ErrInvalid, err)
	}
	if !utf8.ValidString(c.DistributorVersion) {
		return fmt.Errorf("%w: distributor_version is not valid UTF-8", ErrInvalid)
	}
	return nil
}

// Validate checks one record.
func (o Output) Validate() error {
	if err := ValidateOutputPath(o.Path); err != nil {
		return err
	}
	return o.ValidateFields()
}

// ValidateFields is Validate but for the path: for a record whose path
// was checked already (the planner checks each desired path first).
func (o Output) ValidateFields() error {
	switch {
	case o.PipelineID == "":
		return fmt.Errorf("%q: pipeline_id is required", o.Path)
	case o.DestinationID == "":
		return fmt.Errorf("%q: destination_id is required", o.Path)
	case o.Source.ID == "":
		return fmt.Errorf("%q: source.id is required", o.Path)
	case !ValidDigest(o.Source.Digest):
		return fmt.Errorf("%q: source.digest must be sha256:<64 lowercase hex>", o.Path)
	case o.Source.Created.IsZero():
		return fmt.Errorf("%q: source.created is required", o.Path)
	case !ValidDigest(o.SHA256):
		return fmt.Errorf("%q: sha256 must be sha256:<64 lowercase hex>", o.Path)
	case o.Size < 0:
		return fmt.Errorf("%q: size must not be negative", o.Path)
	case o.CreatedAt.IsZero() || o.UpdatedAt.IsZero():
		return fmt.Errorf("%q: created_at and updated_at are required", o.Path)
	}
	if err := writableTimes(o.Source.Created, o.CreatedAt, o.UpdatedAt); err != nil {
		return fmt.Errorf("%q: %w", o.Path, err)
	}

	// JSON would silently turn invalid UTF-8 into U+FFFD: the record written
	// would not be the record read back.
	for _, f := range []struct{ name, v string }{
		{"pipeline_id", o.PipelineID}, {"destination_id", o.DestinationID}, {"source.id", o.Source.ID},
		{"transform", o.Transform}, {"url", o.URL},
	} {
		if !utf8.ValidString(f.v) {
			return fmt.Errorf("%q: %s is not valid UTF-8", o.Path, f.name)
		}
	}
	switch o.Kind {
	case KindSource:
		if o.SourcePath != "" || o.Transform != "" {
			return fmt.Errorf("%q: a source output carries no source_path or transform", o.Path)
		}
	case KindGenerated:
		if o.SourcePath == "" || o.Transform == "" {
			return fmt.Errorf("%q: a generated output needs source_path and transform", o.Path)
		}
		if err := ValidatePath(o.SourcePath); err != nil {
			return fmt.Errorf("%q: source_path: %v", o.Path, err)
		}
	default:
		return fmt.Errorf("%q: kind must be %q or %q, not %q", o.Path, KindSource, KindGenerated, o.Kind)
	}
	return nil
}

// writableTimes rejects times whose UTC form RFC3339 cannot express (years
// outside 0000-9999): written, they would never read back. A parsed time with
// an offset can land there ("0000-01-01T00:00:00+01:00").
func writableTimes(ts ...time.Time) error {
	for _, t := range ts {
		if y := t.UTC().Year(); y < 0 || y > 9999 {
			return fmt.Errorf("time %s is outside years 0000-9999 in UTC", t.UTC().Format(time.RFC3339Nano))
		}
	}
	return nil
}

// Sort orders outputs by path (the written order).
func (c *Catalog) Sort() {
	if sorted(c.Outputs) {
		return
	}
	sort.Slice(c.Outputs, func(i, j int) bool { return c.Outputs[i].Path < c.Outputs[j].Path })
}

// --- wire format ---

type wireState struct {
	Mode *string `json:"mode"`
}

type wireSource struct {
	ID      *string `json:"id"`
	Digest  *string `json:"digest"`
	Created *string `json:"created"`
}

type wireOutput struct {
	Path          *string     `json:"path"`
	PipelineID    *string     `json:"pipeline_id"`
	DestinationID *string     `json:"destination_id"`
	Source        *wireSource `json:"source"`
	Kind          *string     `json:"kind"`
	SourcePath    *string     `json:"source_path,omitempty"`
	Transform     *string     `json:"transform,omitempty"`
	SHA256        *string     `json:"sha256"`
	Size          *int64      `json:"size"`
	CreatedAt     *string     `json:"created_at"`
	UpdatedAt     *string     `json:"updated_at"`
	URL           *string     `json:"url,omitempty"`
}

type wireCatalog struct {
	SchemaVersion      *int          `json:"schema_version"`
	DistributorVersion *string       `json:"distributor_version,omitempty"`
	CreatedAt          *string       `json:"created_at"`
	UpdatedAt          *string       `json:"updated_at"`
	State              *wireState    `json:"state"`
	Outputs            *[]wireOutput `json:"outputs"`
}

// Parse reads a catalog file strictly. It returns:
//   - (cat, false, nil) for a valid v4 catalog;
//   - (nil, true, nil) for superseded legacy state (schema_version < 4);
//   - an error wrapping ErrNewer for schema_version > 4;
//   - an error wrapping ErrInvalid for anything else, including a key
//     repeated in one object (at any level, compared as encoding/json
//     matches field names).
func Parse(data []byte) (cat *Catalog, legacy bool, err error) {
	if c, ok := parseFast(data); ok {
		return c, false, nil
	}
	return parseReference(data)
}

// ParseOwned is Parse for a caller that hands data over: the catalog's
// strings may point into data, and Marshal of it or of its Successor
// copies the bytes of unchanged records from data. data must not be
// modified afterwards.
func ParseOwned(data []byte) (cat *Catalog, legacy bool, err error) {
	if c, ok := parseFastMode(data, true); ok {
		return c, false, nil
	}
	return parseReference(data)
}

// parseReference is Parse through encoding/json: the reference for every
// input, and the reader of everything parseFast leaves to it.
func parseReference(data []byte) (cat *Catalog, legacy bool, err error) {
	if legacy, err := checkSchemaVersion(data); legacy || err != nil {
		return nil, legacy, err
	}
	var w wireCatalog
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&w); err != nil {
		return nil, false, fmt.Errorf("%w: %v", ErrInvalid, err)
	}
	if dec.More() {
		return nil, false, fmt.Errorf("%w: trailing data after the JSON object", ErrInvalid)
	}
	c, err := w.decode()
	if err != nil {
		return nil, false, err
	}
	if err := c.Validate(); err != nil {
		return nil, false, err
	}
	c.Sort()
	return c, false, nil
}

// checkSchemaVersion reads the schema version of a catalog file: legacy
// for versions 1-3, an error for a newer or impossible one, for a key
// repeated in one object, and for anything that is not a JSON object.
func checkSchemaVersion(data []byte) (legacy bool, err error) {
	var head struct {
		SchemaVersion json.RawMessage `json:"schema_version"`
	}
	if err := json.Unmarshal(data, &head); err != nil {
		return false, fmt.Errorf("%w: not a JSON object: %v", ErrInvalid, err)
	}

	// encoding/json keeps the last of repeated keys: "schema_version": 4,
	// "schema_version": 3 would read as legacy state a replacement may clear.
	if dup := jsonkeys.Duplicate(data); dup != nil {
		return false, fmt.Errorf("%w: %v: a key may appear once per object; fix the file by hand (which value is meant cannot be guessed)", ErrInvalid, dup)
	}
	if head.SchemaVersion == nil || string(head.SchemaVersion) == "null" {
		return false, fmt.Errorf("%w: schema_version is missing", ErrInvalid)
	}

	// A number, not a string that looks like one: "2" must not pass as legacy.
	v, err := strconv.ParseInt(string(head.SchemaVersion), 10, 64)
	if err != nil {
		return false, fmt.Errorf("%w: schema_version %s is not an integer", ErrInvalid, head.SchemaVersion)
	}
	switch {
	case v < 1:
		// Versions 1-3 existed; anything lower is damage, not legacy state
		// (legacy state may be cleared by a replacement run).
		return false, fmt.Errorf("%w: schema_version %d does not exist", ErrInvalid, v)
	case v < SchemaVersion:
		return true, nil
	case v > SchemaVersion:
		return false, fmt.Errorf("%w (schema_version %d; this one reads %d): upgrade distributor", ErrNewer, v, SchemaVersion)
	}
	return false, nil
}

// decode turns a decoded v4 catalog into a Catalog (not yet validated),
// refusing missing fields.
func (w wireCatalog) decode() (*Catalog, error) {
	missing := func(field string) (*Catalog, error) {
		return nil, fmt.Errorf("%w: %s is required", ErrInvalid, field)
	}
	if w.CreatedAt == nil {
		return missing("created_at")
	}
	if w.UpdatedAt == nil {
		return missing("updated_at")
	}
	if w.State == nil || w.State.Mode == nil {
		return missing("state.mode")
	}
	if *w.State.Mode != ModeCatalog {
		return nil, fmt.Errorf("%w: state.mode is %q, want %q", ErrInvalid, *w.State.Mode, ModeCatalog)
	}
	if w.Outputs == nil {
		return missing("outputs")
	}
	c := &Catalog{}
	if w.DistributorVersion != nil {
		if *w.DistributorVersion == "" {
			return nil, fmt.Errorf("%w: distributor_version is empty; omit it instead", ErrInvalid)
		}
		c.DistributorVersion = *w.DistributorVersion
	}
	var err error
	if c.CreatedAt, err = parseTime("created_at", *w.CreatedAt); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalid, err)
	}
	if c.UpdatedAt, err = parseTime("updated_at", *w.UpdatedAt); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalid, err)
	}
	c.Outputs = make([]Output, 0, len(*w.Outputs))
	for i, wo := range *w.Outputs {
		o, err := wo.decode()
		if err != nil {
			return nil, fmt.Errorf("%w: outputs[%d]: %v", ErrInvalid, i, err)
		}
		c.Outputs = append(c.Outputs, o)
	}
	return c, nil
}

func (w wireOutput) decode() (Output, error) {
	var o Output
	req := []struct {
		name string
		p    *string
		dst  *string
	}{
		{"path", w.Path, &o.Path},
		{"pipeline_id", w.PipelineID, &o.PipelineID},
		{"destination_id", w.DestinationID, &o.DestinationID},
		{"kind", w.Kind, &o.Kind},
		{"sha256", w.SHA256, &o.SHA256},
	}
	for _, r := range req {
		if r.p == nil {
			return o, fmt.Errorf("%s is required", r.name)
		}
		*r.dst = *r.p
	}
	if w.Source == nil || w.Source.ID == nil || w.Source.Digest == nil || w.Source.Created == nil {
		return o, fmt.Errorf("%q: source with id, digest and created is required", o.Path)
	}
	if w.Size == nil {
		return o, fmt.Errorf("%q: size is required", o.Path)
	}
	if w.CreatedAt == nil || w.UpdatedAt == nil {
		return o, fmt.Errorf("%q: created_at and updated_at are required", o.Path)
	}
	o.Size = *w.Size
	o.Source.ID = *w.Source.ID
	o.Source.Digest = *w.Source.Digest
	var err error
	if o.Source.Created, err = parseTime("source.created", *w.Source.Created); err != nil {
		return o, fmt.Errorf("%q: %w", o.Path, err)
	}
	if o.CreatedAt, err = parseTime("created_at", *w.CreatedAt); err != nil {
		return o, fmt.Errorf("%q: %w", o.Path, err)
	}
	if o.UpdatedAt, err = parseTime("updated_at", *w.UpdatedAt); err != nil {
		return o, fmt.Errorf("%q: %w", o.Path, err)
	}

	// Present-but-empty optional fields are as wrong as misplaced ones.
	for _, opt := range []struct {
		name string
		p    *string
		dst  *string
	}{{"source_path", w.SourcePath, &o.SourcePath}, {"transform", w.Transform, &o.Transform}, {"url", w.URL, &o.URL}} {
		if opt.p == nil {
			continue
		}
		if *opt.p == "" {
			return o, fmt.Errorf("%q: %s is empty; omit it instead", o.Path, opt.name)
		}
		*opt.dst = *opt.p
	}
	return o, nil
}

func parseTime(field, s string) (time.Time, error) {
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return time.Time{}, fmt.Errorf("%s %q is not an RFC3339 time", field, s)
	}
	return t.UTC(), nil
}

// FormatTime renders t as the catalog writes times: RFC3339, UTC.
func FormatTime(t time.Time) string { return t.UTC().Format(time.RFC3339Nano) }

// MaxRecords bounds from above how many records a catalog of size bytes
// holds: a record takes at least 256 bytes in any JSON form (two digests
// of 71 bytes, three times, the keys).
func MaxRecords(size int) int { return size / 256 }

// Marshal writes the catalog deterministically: outputs sorted by path,
// two-space indent, trailing newline, RFC3339 UTC times. It refuses to write
// a catalog that would not read back as valid.
func Marshal(c *Catalog) ([]byte, error) {
	return marshal(c, nil)
}

// MarshalTo writes exactly what Marshal returns to w, as it is made,
// without holding the whole document. On an error (an invalid catalog, or
// w's) part of it may have been written: write to something that is
// discarded on error.
func MarshalTo(w io.Writer, c *Catalog) error {
	_, err := marshal(c, w)
	return err
}

func marshal(c *Catalog, w io.Writer) ([]byte, error) {
	cp := *c
	if !sorted(c.Outputs) {
		cp.Outputs = append([]Output(nil), c.Outputs...)
		cp.Sort()
	}
	if err := cp.validateHead(); err != nil {
		return nil, err
	}

	// The records are validated as they are encoded, but for those copied
	// as read: they were validated then, and hold the same values.
	return marshalFast(&cp, w)
}
