package catalog_test

import (
	"bytes"
	"errors"
	"io"
	"reflect"
	"strings"
	"testing"
	"testing/iotest"

	"pgregory.net/rapid"

	"github.com/distributor/distributor/catalog"
)

// TestScanTellsWhereEachRecordLies: Record.Offset is where the record's
// bytes start in the document, however the reads split it and whether
// or not it is read whole.
func TestScanTellsWhereEachRecordLies(t *testing.T) {
	t.Parallel()
	data, err := catalog.Marshal(benchCat(3000)) // many read windows
	if err != nil {
		t.Fatal(err)
	}
	for _, piece := range []int{0, 1000, 100_000} {
		var r io.Reader = bytes.NewReader(data)
		size := int64(len(data))
		if piece > 0 {
			r, size = &pieces{data: data, n: piece}, -1
		}
		n := 0
		_, err := catalog.Scan(r, size, func(rec *catalog.Record) error {
			if at := data[rec.Offset:]; !bytes.HasPrefix(at, rec.Raw) {
				t.Fatalf("piece %d: record %d at offset %d, whose bytes start %.40q", piece, n, rec.Offset, at)
			}
			n++
			return nil
		})
		if err != nil || n != 3000 {
			t.Fatalf("piece %d: %d records, %v", piece, n, err)
		}
	}
}

// TestMergeRefusesALayoutOfOtherBytes: Merge copies the records it keeps
// where the layout says they lie; bytes that are not those the layout was
// read from fail the merge instead of being copied cut in the wrong
// places.
func TestMergeRefusesALayoutOfOtherBytes(t *testing.T) {
	t.Parallel()
	old := benchCat(50)
	data, err := catalog.Marshal(old)
	if err != nil {
		t.Fatal(err)
	}
	other := benchCat(50)
	other.Outputs[0].Path = "longer/" + other.Outputs[0].Path
	otherData, err := catalog.Marshal(other)
	if err != nil {
		t.Fatal(err)
	}
	lay := layoutOf(t, data)
	for name, bad := range map[string][]byte{"other bytes": otherData, "cut short": data[:len(data)/2]} {
		err := catalog.Merge(io.Discard, bytes.NewReader(bad), lay, old.Successor(), nil)
		if err == nil || !strings.Contains(err.Error(), "the catalog merged") {
			t.Errorf("%s: Merge = %v, want the catalog merged refused", name, err)
		}
	}
	var got bytes.Buffer
	if err := catalog.Merge(&got, bytes.NewReader(data), lay, old.Successor(), nil); err != nil {
		t.Fatalf("Merge of the bytes read: %v", err)
	}
}

// laidOut is what ScanLayout gave: the layout's paths and offsets, the
// records picked, the head, and how it ended.
type laidOut struct {
	head   catalog.Head
	paths  []string
	offs   []int64
	end    int64
	picked []catalog.Output
	err    error
}

func layOut(scan func(lay *catalog.Layout, pick func(*catalog.Output) bool) (catalog.Head, []catalog.Output, error)) laidOut {
	var l laidOut
	lay := catalog.NewLayout(-1)
	pick := func(o *catalog.Output) bool { return strings.Contains(o.Path, "a") }
	l.head, l.picked, l.err = scan(lay, pick)
	for i := range lay.Len() {
		l.paths = append(l.paths, lay.Path(i))
	}
	l.offs, l.end = lay.Offsets()
	return l
}

// TestScanInBlocksReadsAsOneScan: a document read in blocks of whole
// records, parsed beside each other, lays out and picks what one scan of
// it does, in the same order, and ends the same way, however small the
// blocks and whatever damage the document took.
func TestScanInBlocksReadsAsOneScan(t *testing.T) {
	t.Parallel()
	rapid.Check(t, func(t *rapid.T) {
		c := catalogGen.Draw(t, "catalog")
		data, err := catalog.Marshal(c)
		if err != nil {
			t.Fatal(err)
		}
		if rapid.Bool().Draw(t, "damaged") {
			i := rapid.IntRange(0, len(data)-1).Draw(t, "at")
			data[i] = rapid.SampledFrom([]byte(" \n\"{}[],:0a\\")).Draw(t, "replacement")
		}
		block := rapid.IntRange(1, 4096).Draw(t, "block")
		one := layOut(func(lay *catalog.Layout, pick func(*catalog.Output) bool) (catalog.Head, []catalog.Output, error) {
			return catalog.ScanLayout(&pieces{data: data, n: 7}, -1, lay, pick)
		})
		blocks := layOut(func(lay *catalog.Layout, pick func(*catalog.Output) bool) (catalog.Head, []catalog.Output, error) {
			return catalog.ScanBlocks(&pieces{data: data, n: 1000}, block, lay, pick)
		})
		if (one.err == nil) != (blocks.err == nil) || errors.Is(one.err, catalog.ErrNotStreamed) != errors.Is(blocks.err, catalog.ErrNotStreamed) {
			t.Fatalf("one scan ended with %v, in blocks of %d with %v", one.err, block, blocks.err)
		}
		if one.err != nil {
			return
		}
		if !reflect.DeepEqual(one, blocks) {
			t.Fatalf("one scan laid out %d records, in blocks of %d %d:\n%+v\n%+v", len(one.paths), block, len(blocks.paths), one, blocks)
		}
	})
}

// TestScanInBlocksReturnsReadErrors: a read error ends a scan in blocks
// and is returned.
func TestScanInBlocksReturnsReadErrors(t *testing.T) {
	t.Parallel()
	data, err := catalog.Marshal(benchCat(2000))
	if err != nil {
		t.Fatal(err)
	}
	broken := errors.New("broken disk")
	r := io.MultiReader(bytes.NewReader(data[:100_000]), iotest.ErrReader(broken))
	_, _, err = catalog.ScanBlocks(r, 4096, catalog.NewLayout(-1), func(*catalog.Output) bool { return true })
	if !errors.Is(err, broken) {
		t.Fatalf("ScanBlocks = %v, want the read error", err)
	}
}

// TestLayoutHasWhatItHolds: Has finds each path a layout holds and none
// other, whether it searches (a few calls) or, asked about many paths,
// answers from its table.
func TestLayoutHasWhatItHolds(t *testing.T) {
	t.Parallel()
	for _, n := range []int{10, 10_000} {
		data, err := catalog.Marshal(benchCat(n))
		if err != nil {
			t.Fatal(err)
		}
		lay := layoutOf(t, data)
		for round := range 2 { // the second round past the searches
			for i := range lay.Len() {
				p := lay.Path(i)
				if !lay.Has(p) || lay.Has(p+"x") || lay.Has(p[:len(p)-1]) {
					t.Fatalf("%d records, round %d: Has(%q) false, or true of a path beside it", n, round, p)
				}
			}
		}
		if lay.Has("") || lay.Has("nowhere") {
			t.Fatalf("%d records: Has finds a path not held", n)
		}
	}
}
