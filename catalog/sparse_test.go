package catalog_test

import (
	"bytes"
	"errors"
	"reflect"
	"slices"
	"strings"
	"testing"

	"pgregory.net/rapid"

	"github.com/distributor/distributor/catalog"
)

// manyRecordsGen is a catalog of up to 40 records: runs of a sparse
// layout of small runs hold one record to several.
var manyRecordsGen = rapid.Custom(func(t *rapid.T) *catalog.Catalog {
	c := &catalog.Catalog{CreatedAt: timeGen.Draw(t, "created"), UpdatedAt: timeGen.Draw(t, "updated"), DistributorVersion: "old"}
	for _, p := range rapid.SliceOfNDistinct(pathGen, 0, 40, rapid.ID[string]).Draw(t, "paths") {
		c.Outputs = append(c.Outputs, outputGen(p).Draw(t, "output"))
	}
	c.Sort()
	return c
})

// drawLayout is a layout of data as a scan notes it: sparse, of runs of
// a drawn size, or not (dense), read in one scan or in blocks.
func drawLayout(t *rapid.T, data []byte, sparse bool) *catalog.Layout {
	lay := catalog.NewLayout(int64(len(data)))
	if sparse {
		lay = catalog.NewSparseLayoutOf(rapid.Int64Range(1, 4096).Draw(t, "run bytes"))
	}
	all := func(*catalog.Output) bool { return true }
	var err error
	if rapid.Bool().Draw(t, "in blocks") {
		_, _, err = catalog.ScanBlocks(&pieces{data: data, n: 1000}, rapid.IntRange(1, 4096).Draw(t, "block"), lay, all)
	} else {
		_, _, err = catalog.ScanLayout(&pieces{data: data, n: 7}, -1, lay, all)
	}
	if err != nil {
		t.Fatal(err)
	}
	return lay
}

// TestSparseMergeIsMarshalOfTheWhole: Merge by a sparse layout (runs of
// records, not each record) writes exactly what Marshal writes for the
// whole next catalog, as Merge by a layout of each record does, however
// the runs fall, whichever records are dropped, replaced or added, and
// with paths dropped that no record is at. The layout counts the records
// and tells, for each, a path at or before its own, never decreasing.
func TestSparseMergeIsMarshalOfTheWhole(t *testing.T) {
	t.Parallel()
	rapid.Check(t, func(t *rapid.T) {
		old := manyRecordsGen.Draw(t, "old")
		data, err := catalog.Marshal(old)
		if err != nil {
			t.Fatal(err)
		}
		nowhere := rapid.SliceOfDistinct(pathGen, rapid.ID[string]).Filter(func(ps []string) bool {
			return !slices.ContainsFunc(ps, func(p string) bool { _, found := old.Lookup(p); return found })
		}).Draw(t, "dropped where no record is")
		next, dropped, want := drawMerge(t, old, nowhere)
		lay := drawLayout(t, data, true)
		if lay.Len() != len(old.Outputs) {
			t.Fatalf("the sparse layout counts %d records, the catalog holds %d", lay.Len(), len(old.Outputs))
		}
		for i := range lay.Len() {
			near := lay.Near(i)
			if _, found := old.Lookup(near); !found || near > old.Outputs[i].Path || i > 0 && near < lay.Near(i-1) {
				t.Fatalf("Near(%d) = %q, record %d is at %q", i, near, i, old.Outputs[i].Path)
			}
		}
		var got bytes.Buffer
		if err := catalog.Merge(&got, &pieces{data: data, n: rapid.IntRange(1, 64).Draw(t, "piece")}, lay, next, dropped); err != nil {
			t.Fatalf("Merge: %v", err)
		}
		if !bytes.Equal(got.Bytes(), want) {
			t.Fatalf("Merge wrote\n%s\nMarshal of the whole\n%s", got.Bytes(), want)
		}
	})
}

// TestMergeRefusesOtherBytesThanItsLayouts: Merge by a layout, sparse or
// not, of bytes other than those it was noted from (a kept record's bytes
// grown or shrunk, or the document cut short before its end) fails, naming the catalog
// merged, instead of writing records cut in the wrong places.
func TestMergeRefusesOtherBytesThanItsLayouts(t *testing.T) {
	t.Parallel()
	rapid.Check(t, func(t *rapid.T) {
		old := manyRecordsGen.Filter(func(c *catalog.Catalog) bool { return len(c.Outputs) > 0 }).Draw(t, "old")
		data, err := catalog.Marshal(old)
		if err != nil {
			t.Fatal(err)
		}
		lay := drawLayout(t, data, rapid.Bool().Draw(t, "sparse"))
		next := old.Successor()
		var dropped []string
		keep := rapid.IntRange(0, len(old.Outputs)-1).Draw(t, "damaged record")
		for i, o := range old.Outputs {
			if i != keep && rapid.Bool().Draw(t, "dropped") {
				dropped = append(dropped, o.Path)
			}
		}
		var bad []byte
		if rapid.Bool().Draw(t, "cut short") {
			bad = data[:rapid.IntRange(0, recordEnd(t, data, keep)-1).Draw(t, "cut at")]
		} else {
			// A path of the record kept one byte longer or shorter: the
			// bytes after it move.
			at := bytes.Index(data, []byte("\"path\": \""+strings.ReplaceAll(old.Outputs[keep].Path, `"`, `\"`)))
			if at < 0 {
				t.Skip("the path is written escaped")
			}
			at += len("\"path\": \"")
			bad = slices.Clone(data)
			if rapid.Bool().Draw(t, "longer") {
				bad = slices.Insert(bad, at, 'x')
			} else {
				bad = slices.Delete(bad, at, at+1)
			}
		}
		err = catalog.Merge(&bytes.Buffer{}, bytes.NewReader(bad), lay, next, dropped)
		if err == nil || !strings.Contains(err.Error(), "the catalog merged") {
			t.Fatalf("Merge of other bytes = %v, want the catalog merged refused", err)
		}
	})
}

// recordEnd is where the i-th record of data ends.
func recordEnd(t *rapid.T, data []byte, i int) int {
	end, n := -1, 0
	if _, err := catalog.Scan(bytes.NewReader(data), -1, func(rec *catalog.Record) error {
		if n == i {
			end = int(rec.Offset) + len(rec.Raw)
		}
		n++
		return nil
	}); err != nil || end < 0 {
		t.Fatalf("record %d: %v", i, err)
	}
	return end
}

// TestSparseScanInBlocksEndsAsOneScan: a document read in blocks into a
// sparse layout picks what one scan of it does, counts its records, and
// ends the same way, whatever damage the document took (records out of
// path order across two blocks included).
func TestSparseScanInBlocksEndsAsOneScan(t *testing.T) {
	t.Parallel()
	rapid.Check(t, func(t *rapid.T) {
		c := manyRecordsGen.Draw(t, "catalog")
		data, err := catalog.Marshal(c)
		if err != nil {
			t.Fatal(err)
		}
		switch rapid.IntRange(0, 2).Draw(t, "damage") {
		case 1:
			i := rapid.IntRange(0, len(data)-1).Draw(t, "at")
			data[i] = rapid.SampledFrom([]byte(" \n\"{}[],:0a\\")).Draw(t, "replacement")
		case 2: // two records swapped: out of path order
			if len(c.Outputs) > 1 {
				i := rapid.IntRange(0, len(c.Outputs)-2).Draw(t, "swapped")
				a, b := recordEnd(t, data, i), recordEnd(t, data, i+1)
				start := bytes.LastIndex(data[:a], []byte("\n    {")) + len("\n    ")
				first, second := slices.Clone(data[start:a]), slices.Clone(data[a+len(",\n    "):b])
				data = slices.Concat(data[:start], second, []byte(",\n    "), first, data[b:])
			}
		}
		pick := func(o *catalog.Output) bool { return strings.Contains(o.Path, "a") }
		one := catalog.NewLayout(-1)
		h1, picked1, err1 := catalog.ScanLayout(&pieces{data: data, n: 7}, -1, one, pick)
		block := rapid.IntRange(1, 4096).Draw(t, "block")
		sparse := catalog.NewSparseLayoutOf(rapid.Int64Range(1, 4096).Draw(t, "run bytes"))
		h2, picked2, err2 := catalog.ScanBlocks(&pieces{data: data, n: 1000}, block, sparse, pick)
		if (err1 == nil) != (err2 == nil) || errors.Is(err1, catalog.ErrNotStreamed) != errors.Is(err2, catalog.ErrNotStreamed) {
			t.Fatalf("one scan ended with %v, in blocks of %d into a sparse layout with %v", err1, block, err2)
		}
		if err1 != nil {
			return
		}
		if h1 != h2 || !reflect.DeepEqual(picked1, picked2) || one.Len() != sparse.Len() {
			t.Fatalf("one scan read %d records, in blocks into a sparse layout %d", one.Len(), sparse.Len())
		}
	})
}
