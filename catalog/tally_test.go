package catalog_test

import (
	"bytes"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"pgregory.net/rapid"

	"github.com/distributor/distributor/catalog"
)

// tallyAll scans data with ScanTally through a reader that returns it in
// pieces of the given size and returns the head and tallies read (their
// strings copied).
func tallyAll(data []byte, piece int) (catalog.Head, []catalog.Tally, error) {
	var ts []catalog.Tally
	h, err := catalog.ScanTally(&pieces{data: data, n: piece}, func(t *catalog.Tally) error {
		c := *t
		c.Owner.PipelineID, c.Owner.DestinationID = string([]byte(t.Owner.PipelineID)), string([]byte(t.Owner.DestinationID))
		c.Source.ID, c.Source.Digest = string([]byte(t.Source.ID)), string([]byte(t.Source.Digest))
		ts = append(ts, c)
		return nil
	})
	return h, ts, err
}

// tallies is what ScanTally should give of c's records.
func tallies(c *catalog.Catalog) []catalog.Tally {
	var ts []catalog.Tally
	for _, o := range c.Outputs {
		ts = append(ts, catalog.Tally{Owner: o.Owner(), Source: o.Source, Size: o.Size, UpdatedAt: o.UpdatedAt})
	}
	return ts
}

// skippedValue reports whether Parse refused a document for a value
// ScanTally does not read.
func skippedValue(err error) bool {
	for _, s := range []string{"invalid path", "sha256 must", "kind must", "source_path", "transform", "created_at", "url"} {
		if err != nil && strings.Contains(err.Error(), s) {
			return true
		}
	}
	return false
}

func sameTallies(a, b []catalog.Tally) bool {
	return slices.EqualFunc(a, b, func(x, y catalog.Tally) bool {
		return x.Owner == y.Owner && x.Source.ID == y.Source.ID && x.Source.Digest == y.Source.Digest &&
			x.Source.Created.Equal(y.Source.Created) && x.Size == y.Size && x.UpdatedAt.Equal(y.UpdatedAt)
	})
}

// TestScanTallyReadsWhatParseReads: of what Marshal writes, damaged or
// reformatted at random, ScanTally gives each record's tally as Parse
// reads it, or leaves the document to Parse (ErrNotStreamed) as Scan
// does. The only documents it reads that Scan does not are ones Parse
// refuses for a value ScanTally skips.
func TestScanTallyReadsWhatParseReads(t *testing.T) {
	t.Parallel()
	rapid.Check(t, func(t *rapid.T) {
		c := catalogGen.Draw(t, "catalog")
		data, err := catalog.Marshal(c)
		if err != nil {
			t.Fatal(err)
		}
		for range rapid.IntRange(0, 3).Draw(t, "edits") {
			i := rapid.IntRange(0, len(data)).Draw(t, "at")
			switch rapid.IntRange(0, 2).Draw(t, "edit") {
			case 0:
				data = slices.Insert(data, i, rapid.Byte().Draw(t, "byte"))
			case 1:
				if i < len(data) {
					data = slices.Delete(data, i, i+1)
				}
			default:
				if i < len(data) {
					data[i] = rapid.SampledFrom([]byte(" \n\"{}[],:0a\\")).Draw(t, "replacement")
				}
			}
		}
		h, got, err := tallyAll(data, rapid.IntRange(1, 40).Draw(t, "piece"))
		_, scanErr := scanAll(data, 0)
		want, legacy, parseErr := catalog.Parse(data)
		switch {
		case err != nil && !errors.Is(err, catalog.ErrNotStreamed):
			t.Fatalf("ScanTally error %v is not ErrNotStreamed", err)
		case err != nil && scanErr == nil:
			t.Fatalf("ScanTally = %v on a document Scan reads", err)
		case err != nil:
		case parseErr != nil || legacy:
			if scanErr == nil {
				t.Fatalf("Scan read a document Parse refuses: %v", parseErr)
			}
			if !skippedValue(parseErr) {
				t.Fatalf("ScanTally read a document Parse refuses for a value it gives: %v", parseErr)
			}
		case h.UpdatedAt != want.UpdatedAt || h.CreatedAt != want.CreatedAt || !sameTallies(got, tallies(want)):
			t.Fatalf("ScanTally read %+v %+v, Parse %+v", h, got, want)
		}
	})
}

// TestScanTallyLeavesOtherDocumentsToParse: a document in another form,
// out of path order, or with an invalid value the tally gives ends the
// scan with ErrNotStreamed; an invalid value it skips does not.
func TestScanTallyLeavesOtherDocumentsToParse(t *testing.T) {
	t.Parallel()
	canon, err := catalog.Marshal(seedExample(t))
	if err != nil {
		t.Fatal(err)
	}
	cases := map[string][]byte{
		"empty":                 nil,
		"cut short":             canon[:len(canon)-20],
		"legacy":                []byte(`{"schema_version": 3, "outputs": []}`),
		"escaped path":          bytes.Replace(canon, []byte(`"path": "`), []byte(`"path": "\u0061`), 1),
		"invalid source digest": bytes.Replace(canon, []byte(`"digest": "sha256:`), []byte(`"digest": "sha257:`), 1),
		"empty pipeline":        bytes.Replace(canon, []byte(`"pipeline_id": "`), []byte(`"pipeline_id": "", "x": "`), 1),
	}
	for name, data := range cases {
		t.Run(name, func(t *testing.T) {
			if _, _, err := tallyAll(data, 7); !errors.Is(err, catalog.ErrNotStreamed) {
				t.Fatalf("ScanTally = %v, want ErrNotStreamed", err)
			}
		})
	}
	skipped := bytes.Replace(canon, []byte(`"sha256": "sha256:`), []byte(`"sha256": "sha257:`), 1)
	if _, ts, err := tallyAll(skipped, 7); err != nil || len(ts) != len(seedExample(t).Outputs) {
		t.Fatalf("ScanTally of a record with an invalid sha256 = %d tallies, %v; want every record", len(ts), err)
	}
}

// BenchmarkScanTally reads a catalog's tallies, as a status of a large
// root does.
func BenchmarkScanTally(b *testing.B) {
	for _, n := range benchSizes(b) {
		data := benchCatalog(b, n)
		b.Run(fmt.Sprintf("records=%d", n), func(b *testing.B) {
			b.SetBytes(int64(len(data)))
			b.ReportAllocs()
			for b.Loop() {
				seen := 0
				_, err := catalog.ScanTally(bytes.NewReader(data), func(*catalog.Tally) error { seen++; return nil })
				if err != nil || seen != n {
					b.Fatalf("scan: %v", err)
				}
			}
		})
	}
}
