package catalog

import (
	"fmt"
	"hash/maphash"
	"io"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/distributor/distributor/internal/jsonfast"
)

// The codec's fast paths. Catalogs grow to a million records (half a
// gigabyte): encoding/json's reflection, its indent pass and one allocation
// per field made reading and writing them the bulk of a publication.
//
// parseFast reads the catalog form this package writes (and any key order
// or whitespace) and gives up on anything else: null, an unknown or
// differently cased key, a repeated key, a number that is not a plain
// integer, invalid UTF-8, a missing field, an invalid catalog. Parse then
// runs the strict encoding/json decoder, whose answer (and error message) is
// the reference. So whatever parseFast accepts, the reference decoder
// accepts the same way.
func parseFast(data []byte) (*Catalog, bool) { return parseFastMode(data, false) }

// parseFastMode is parseFast; with own, the catalog's strings may point
// into data and it remembers where its canonical records are (origin).
func parseFastMode(data []byte, own bool) (*Catalog, bool) {
	r := &reader{scan: canonScan{d: data, own: own, strs: map[string]string{}, times: map[string]canonTime{}}}
	if own {
		r.origin = &origin{data: data, seed: maphash.MakeSeed()}
	}
	c, ok := jsonfast.Run(data, r.readCatalog)
	if !ok {
		return nil, false
	}
	inOrder, err := c.validate()
	if err != nil {
		return nil, false
	}
	if !inOrder {
		c.Sort()
		r.origin = nil // its spans follow the order read
	}
	c.origin = r.origin
	if c.origin != nil && len(c.Outputs) > 0 {
		c.origin.first, c.origin.n = &c.Outputs[0], len(c.Outputs)
	}
	return c, true
}

// reader holds what one fast parse shares between records.
type reader struct {
	scan   canonScan
	origin *origin // nil unless the catalog keeps its bytes
}

func timeValue(s string) (time.Time, error) { return parseTime("", s) }

func (r *reader) readCatalog(p *jsonfast.Parser) *Catalog {
	c := &Catalog{}
	var seen jsonfast.Keys
	once := seen.Once
	p.Object(func(key []byte) {
		switch string(key) {
		case "schema_version":
			once(0)
			if p.Int() != SchemaVersion {
				jsonfast.Fallback()
			}
		case "distributor_version":
			once(1)
			c.DistributorVersion = p.NonEmpty()
		case "created_at":
			once(2)
			c.CreatedAt = p.Time(timeValue)
		case "updated_at":
			once(3)
			c.UpdatedAt = p.Time(timeValue)
		case "state":
			once(4)
			mode := false
			p.Object(func(key []byte) {
				if string(key) != "mode" || mode || p.Str() != ModeCatalog {
					jsonfast.Fallback()
				}
				mode = true
			})
			if !mode {
				jsonfast.Fallback()
			}
		case "outputs":
			once(5)
			c.Outputs = r.readOutputs(p)
		default:
			jsonfast.Fallback()
		}
	})
	if seen|1<<1 != 1<<6-1 { // every key but distributor_version (1) is required
		jsonfast.Fallback()
	}
	return c
}

func (r *reader) readOutputs(p *jsonfast.Parser) []Output {
	// Records are about 500 bytes written: size the slice once.
	size := min(p.Len()/400+1, 1<<24)
	out := make([]Output, 0, size)
	if r.origin != nil {
		r.origin.spans = make([]span, 0, size)
	}
	p.Array(func() {
		// Canonical records take the template scan; any other form the
		// generic reader.
		rest := p.Rest()
		start := p.Pos()
		r.scan.i = start
		var o Output
		canon := len(rest) > 0 && rest[0] == '{' && r.scan.record(&o)
		if canon {
			p.Skip(r.scan.i - start)
		} else {
			o = readOutput(p)
		}
		out = append(out, o)
		if g := r.origin; g != nil {
			sp := span{path: o.Path, start: start}
			if canon {
				sp.end, sp.hash = r.scan.i, recordHash(g.seed, &o)
			}
			g.spans = append(g.spans, sp)
		}
	})
	return out
}

// Bits of the fields one record has shown.
const (
	fPath = 1 << iota
	fPipeline
	fDestination
	fSource
	fKind
	fSourcePath
	fTransform
	fSHA256
	fSize
	fCreated
	fUpdated
	fURL
	fRequired = fPath | fPipeline | fDestination | fSource | fKind | fSHA256 | fSize | fCreated | fUpdated
)

func readOutput(p *jsonfast.Parser) Output {
	var o Output
	var seen int
	once := func(bit int) {
		if seen&bit != 0 {
			jsonfast.Fallback()
		}
		seen |= bit
	}
	p.Object(func(key []byte) {
		switch string(key) {
		case "path":
			once(fPath)
			o.Path = p.Str()
		case "pipeline_id":
			once(fPipeline)
			o.PipelineID = p.Intern()
		case "destination_id":
			once(fDestination)
			o.DestinationID = p.Intern()
		case "source":
			once(fSource)
			var src int
			p.Object(func(key []byte) {
				switch string(key) {
				case "id":
					once2(&src, 1)
					o.Source.ID = p.Intern()
				case "digest":
					once2(&src, 2)
					o.Source.Digest = p.Intern()
				case "created":
					once2(&src, 4)
					o.Source.Created = p.Time(timeValue)
				default:
					jsonfast.Fallback()
				}
			})
			if src != 7 {
				jsonfast.Fallback()
			}
		case "kind":
			once(fKind)
			o.Kind = p.Intern()
		case "source_path":
			once(fSourcePath)
			o.SourcePath = p.NonEmpty()
		case "transform":
			once(fTransform)
			o.Transform = p.Intern()
			if o.Transform == "" {
				jsonfast.Fallback()
			}
		case "sha256":
			once(fSHA256)
			o.SHA256 = p.Str()
		case "size":
			once(fSize)
			o.Size = p.Int()
		case "created_at":
			once(fCreated)
			o.CreatedAt = p.Time(timeValue)
		case "updated_at":
			once(fUpdated)
			o.UpdatedAt = p.Time(timeValue)
		case "url":
			once(fURL)
			o.URL = p.NonEmpty()
		default:
			jsonfast.Fallback()
		}
	})
	if seen&fRequired != fRequired {
		jsonfast.Fallback()
	}
	return o
}

func once2(seen *int, bit int) {
	if *seen&bit != 0 {
		jsonfast.Fallback()
	}
	*seen |= bit
}

// --- encoder ---

// marshalFast writes c (sorted, its head valid) exactly as encoding/json's
// Encoder with two-space indent and SetEscapeHTML(false) writes the wire
// structs, validating each record it encodes.
//
// With w, the bytes go to w in chunks of about flushSize as they are made
// (a catalog of a million records is half a gigabyte) and the result is
// nil; an error may come after some chunks were written.
func marshalFast(c *Catalog, w io.Writer) ([]byte, error) {
	if w != nil && len(c.Outputs) >= parallelMin && runtime.GOMAXPROCS(0) > 1 {
		return nil, marshalParallel(c, w)
	}
	var t timeCache
	b := make([]byte, 0, 512)
	if w != nil {
		b = make([]byte, 0, flushSize+64<<10)
	}
	b = appendHead(b, c)
	if len(c.Outputs) == 0 {
		return flushed(append(b, "]\n}\n"...), w)
	}
	k := 0 // cursor of c.origin's spans
	for i := range c.Outputs {
		start := len(b)
		var err error
		if b, err = appendRecord(b, c, i, &t, &k); err != nil {
			return nil, err
		}
		switch {
		case w != nil && len(b) >= flushSize:
			if _, err := w.Write(b); err != nil {
				return nil, err
			}
			b = b[:0]
		case w == nil && i == 0:
			// Grow once, from the first record's size, instead of doubling
			// through half a gigabyte.
			b = slices.Grow(b, (len(b)-start+64)*len(c.Outputs)+16)
		}
	}
	return flushed(append(b, "\n  ]\n}\n"...), w)
}

// appendHead appends the document up to the first record.
func appendHead(b []byte, c *Catalog) []byte {
	b = append(b, "{\n  \"schema_version\": "...)
	b = strconv.AppendInt(b, SchemaVersion, 10)
	if c.DistributorVersion != "" {
		b = append(b, ",\n  \"distributor_version\": "...)
		b = appendString(b, c.DistributorVersion)
	}
	b = append(b, ",\n  \"created_at\": "...)
	b = appendTime(b, c.CreatedAt)
	b = append(b, ",\n  \"updated_at\": "...)
	b = appendTime(b, c.UpdatedAt)
	return append(b, ",\n  \"state\": {\n    \"mode\": \""+ModeCatalog+"\"\n  },\n  \"outputs\": ["...)
}

// appendRecord appends record i with what precedes it: its bytes as read
// when c.origin has them (k is a cursor of its spans), else encoded and
// validated.
func appendRecord(b []byte, c *Catalog, i int, t *timeCache, k *int) ([]byte, error) {
	o := &c.Outputs[i]
	if i > 0 {
		b = append(b, ',')
	}
	b = append(b, "\n    "...)
	if raw, ok := c.origin.verbatim(o, k); ok {
		b = append(b, raw...)
	} else {
		if err := o.Validate(); err != nil {
			return nil, fmt.Errorf("%w: outputs[%d]: %w", ErrInvalid, i, err)
		}
		b = t.appendOutput(b, o)
	}
	if i > 0 && c.Outputs[i-1].Path == o.Path {
		return nil, fmt.Errorf("%w: outputs[%d]: duplicate path %q", ErrInvalid, i, o.Path)
	}
	return b, nil
}

// parallelMin is the number of records from which MarshalTo encodes on
// several goroutines (a republish that updates every record of a large
// catalog is otherwise bound by one core's encoding); chunkRecords is the
// records one goroutine encodes at a time (~128 KiB: the buffers in flight
// are fresh memory, and each of their pages costs a fault when first
// written).
const (
	parallelMin  = 4096
	chunkRecords = 256
	maxEncoders  = 4
)

// marshalParallel is marshalFast to w with the records encoded in chunks
// on up to maxEncoders goroutines and written in order. At most two
// chunks per goroutine are ahead of the writer, so memory stays bounded
// whatever the catalog's size. The bytes, and the error of the first
// invalid record, are marshalFast's.
func marshalParallel(c *Catalog, w io.Writer) error {
	if _, err := w.Write(appendHead(make([]byte, 0, 512), c)); err != nil {
		return err
	}
	n := len(c.Outputs)
	chunks := (n + chunkRecords - 1) / chunkRecords
	workers := min(runtime.GOMAXPROCS(0), maxEncoders, chunks)
	type chunk struct {
		b   []byte
		err error
	}
	out := make([]chan chunk, chunks)
	for j := range out {
		out[j] = make(chan chunk, 1)
	}

	// A slot is taken before a chunk's index: the chunks taken and not yet
	// written are always the next ones the writer waits for.
	slots := make(chan struct{}, 2*workers)
	free := make(chan []byte, 2*workers)
	stop := make(chan struct{})
	var next atomic.Int64
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			var t timeCache
			for {
				select {
				case slots <- struct{}{}:
				case <-stop:
					return
				}
				j := int(next.Add(1) - 1)
				if j >= chunks {
					return
				}
				var b []byte
				select {
				case b = <-free:
				default:
					b = make([]byte, 0, chunkRecords*640)
				}
				from, to := j*chunkRecords, min(n, (j+1)*chunkRecords)
				k := c.origin.cursor(c.Outputs[from].Path)
				var err error
				for i := from; i < to && err == nil; i++ {
					b, err = appendRecord(b, c, i, &t, &k)
				}
				out[j] <- chunk{b, err}
			}
		})
	}
	defer func() { close(stop); wg.Wait() }()
	for j := range chunks {
		ch := <-out[j]
		<-slots
		if ch.err != nil {
			return ch.err
		}

		// Written in flushSize pieces, as marshalFast writes.
		for b := ch.b; len(b) > 0; b = b[min(len(b), flushSize):] {
			if _, err := w.Write(b[:min(len(b), flushSize)]); err != nil {
				return err
			}
		}
		select {
		case free <- ch.b[:0]: // w keeps nothing it was given (io.Writer)
		default:
		}
	}
	_, err := w.Write([]byte("\n  ]\n}\n"))
	return err
}

// flushSize is how many bytes marshalFast gathers before a write to w.
const flushSize = 256 << 10

// flushed returns b, or with w writes it there and returns nil.
func flushed(b []byte, w io.Writer) ([]byte, error) {
	if w == nil {
		return b, nil
	}
	_, err := w.Write(b)
	return nil, err
}

// timeCache remembers the last rendering of each record time: records next
// to each other mostly share them.
type timeCache struct {
	src, created, updated struct {
		t time.Time
		s []byte
	}
}

func (tc *timeCache) appendOutput(b []byte, o *Output) []byte {
	b = append(b, "{\n      \"path\": "...)
	b = appendString(b, o.Path)
	b = append(b, ",\n      \"pipeline_id\": "...)
	b = appendString(b, o.PipelineID)
	b = append(b, ",\n      \"destination_id\": "...)
	b = appendString(b, o.DestinationID)
	b = append(b, ",\n      \"source\": {\n        \"id\": "...)
	b = appendString(b, o.Source.ID)
	b = append(b, ",\n        \"digest\": "...)
	b = appendString(b, o.Source.Digest)
	b = append(b, ",\n        \"created\": "...)
	b = appendCached(b, &tc.src.t, &tc.src.s, o.Source.Created)
	b = append(b, "\n      },\n      \"kind\": "...)
	b = appendString(b, o.Kind)
	if o.SourcePath != "" {
		b = append(b, ",\n      \"source_path\": "...)
		b = appendString(b, o.SourcePath)
	}
	if o.Transform != "" {
		b = append(b, ",\n      \"transform\": "...)
		b = appendString(b, o.Transform)
	}
	b = append(b, ",\n      \"sha256\": "...)
	b = appendString(b, o.SHA256)
	b = append(b, ",\n      \"size\": "...)
	b = strconv.AppendInt(b, o.Size, 10)
	b = append(b, ",\n      \"created_at\": "...)
	b = appendCached(b, &tc.created.t, &tc.created.s, o.CreatedAt)
	b = append(b, ",\n      \"updated_at\": "...)
	b = appendCached(b, &tc.updated.t, &tc.updated.s, o.UpdatedAt)
	if o.URL != "" {
		b = append(b, ",\n      \"url\": "...)
		b = appendString(b, o.URL)
	}
	return append(b, "\n    }"...)
}

func appendCached(b []byte, last *time.Time, s *[]byte, t time.Time) []byte {
	if *s == nil || !last.Equal(t) {
		*last = t
		*s = appendTime((*s)[:0], t)
	}
	return append(b, *s...)
}

// appendTime appends FormatTime(t) as a JSON string (it needs no escaping).
func appendTime(b []byte, t time.Time) []byte {
	b = append(b, '"')
	b = t.UTC().AppendFormat(b, time.RFC3339Nano)
	return append(b, '"')
}

// appendString appends s quoted as the catalog holds it: as encoding/json
// writes it with HTML escaping off.
func appendString(b []byte, s string) []byte { return jsonfast.AppendString(b, s, false) }

// sorted reports whether outputs are in path order (the written order).
func sorted(outs []Output) bool {
	return slices.IsSortedFunc(outs, func(a, b Output) int { return strings.Compare(a.Path, b.Path) })
}
