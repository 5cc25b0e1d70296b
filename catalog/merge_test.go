package catalog_test

import (
	"bytes"
	"io"
	"strings"
	"testing"

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
