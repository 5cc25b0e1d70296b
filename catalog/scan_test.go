package catalog_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"slices"
	"strings"
	"testing"
	"testing/iotest"

	"pgregory.net/rapid"

	"github.com/distributor/distributor/catalog"
)

// layoutOf is the layout of data as Scan reads it, for Merge.
func layoutOf(t interface{ Fatal(...any) }, data []byte) *catalog.Layout {
	lay := catalog.NewLayout(int64(len(data)))
	if _, err := catalog.Scan(bytes.NewReader(data), -1, func(r *catalog.Record) error { lay.Add(r); return nil }); err != nil {
		t.Fatal(err)
	}
	return lay
}

// scanAll scans data through a reader that returns it in pieces of the
// given size (0: at once, its size told: read whole) and returns the
// catalog read.
func scanAll(data []byte, piece int) (*catalog.Catalog, error) {
	var r io.Reader = bytes.NewReader(data)
	size := int64(len(data))
	if piece > 0 {
		r, size = &pieces{data: data, n: piece}, -1
	}
	var outs []catalog.Output
	var keeper catalog.Keeper
	h, err := catalog.Scan(r, size, func(rec *catalog.Record) error {
		if !bytes.HasPrefix(rec.Raw, []byte("{")) || !bytes.HasSuffix(rec.Raw, []byte("}")) {
			return errors.New("raw is not one object")
		}
		if len(outs)%2 == 0 {
			outs = append(outs, keeper.Keep(rec))
		} else {
			outs = append(outs, rec.Keep())
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return &catalog.Catalog{DistributorVersion: h.DistributorVersion, CreatedAt: h.CreatedAt, UpdatedAt: h.UpdatedAt, Outputs: outs}, nil
}

// pieces reads data n bytes at a time.
type pieces struct {
	data []byte
	n    int
}

func (p *pieces) Read(b []byte) (int, error) {
	if len(p.data) == 0 {
		return 0, io.EOF
	}
	k := copy(b[:min(len(b), p.n)], p.data)
	p.data = p.data[k:]
	return k, nil
}

// TestScanReadsMarshalAsParse: Scan reads what Marshal writes, record by
// record, as Parse reads it, whatever pieces the reader returns.
func TestScanReadsMarshalAsParse(t *testing.T) {
	t.Parallel()
	rapid.Check(t, func(t *rapid.T) {
		c := catalogGen.Draw(t, "catalog")
		data, err := catalog.Marshal(c)
		if err != nil {
			t.Fatal(err)
		}
		want, _, err := catalog.Parse(data)
		if err != nil {
			t.Fatal(err)
		}
		got, err := scanAll(data, rapid.IntRange(0, 40).Draw(t, "piece"))
		if err != nil {
			t.Fatalf("Scan: %v\n%s", err, data)
		}
		assertSameCatalog(t, got, want)
	})
}

// TestScanNeverDisagreesWithParse: whatever Scan reads of a damaged or
// reformatted catalog, Parse reads as the same catalog; anything else
// Scan leaves to Parse with ErrNotStreamed.
func TestScanNeverDisagreesWithParse(t *testing.T) {
	t.Parallel()
	rapid.Check(t, func(t *rapid.T) {
		c := catalogGen.Draw(t, "catalog")
		data, err := catalog.Marshal(c)
		if err != nil {
			t.Fatal(err)
		}
		for range rapid.IntRange(1, 3).Draw(t, "edits") {
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
		got, err := scanAll(data, rapid.IntRange(0, 40).Draw(t, "piece"))
		if err != nil {
			if !errors.Is(err, catalog.ErrNotStreamed) {
				t.Fatalf("Scan error %v is not ErrNotStreamed", err)
			}
			return
		}
		want, legacy, err := catalog.Parse(data)
		if err != nil || legacy {
			t.Fatalf("Scan read a catalog Parse refuses (legacy %v, %v):\n%s", legacy, err, data)
		}
		assertSameCatalog(t, got, want)
	})
}

// TestScanLeavesOtherDocumentsToParse: each document not in Marshal's form
// (or not a valid v4 catalog) ends the scan with ErrNotStreamed.
func TestScanLeavesOtherDocumentsToParse(t *testing.T) {
	t.Parallel()
	c := seedExample(t)
	canon, err := catalog.Marshal(c)
	if err != nil {
		t.Fatal(err)
	}
	var doc map[string]any
	if err := json.Unmarshal(canon, &doc); err != nil {
		t.Fatal(err)
	}
	compact, err := json.Marshal(doc)
	if err != nil {
		t.Fatal(err)
	}
	two := seedExample(t)
	extra := two.Outputs[0]
	extra.Path = "zz/last.txt"
	two.Outputs = append(two.Outputs, extra)
	swapped, err := catalog.Marshal(two)
	if err != nil {
		t.Fatal(err)
	}
	first, second := bytes.Index(swapped, []byte(`"path": "`)), bytes.LastIndex(swapped, []byte(`"path": "`))
	if first == second {
		t.Fatal("the seed example needs two records")
	}
	swapped[first+9], swapped[second+9] = swapped[second+9], swapped[first+9]
	cases := map[string][]byte{
		"empty":                 nil,
		"compact":               compact,
		"cut short":             canon[:len(canon)-20],
		"trailing data":         append(bytes.Clone(canon), '\n'),
		"legacy":                []byte(`{"schema_version": 3, "outputs": []}`),
		"newer":                 bytes.Replace(canon, []byte(`"schema_version": 4`), []byte(`"schema_version": 5`), 1),
		"invalid record digest": bytes.Replace(canon, []byte(`"sha256": "sha256:`), []byte(`"sha256": "sha257:`), 1),
		"records out of order":  swapped,
		"escaped path":          bytes.Replace(canon, []byte(`"path": "`), []byte(`"path": "\u0061`), 1),
	}
	for name, data := range cases {
		t.Run(name, func(t *testing.T) {
			if _, err := scanAll(data, 7); !errors.Is(err, catalog.ErrNotStreamed) {
				t.Fatalf("Scan = %v, want ErrNotStreamed", err)
			}
		})
	}
}

// TestScanReturnsTheCallbacksErrorAndReadErrors: fn's error, and the
// reader's, end the scan as they are.
func TestScanReturnsTheCallbacksErrorAndReadErrors(t *testing.T) {
	t.Parallel()
	data, err := catalog.Marshal(seedExample(t))
	if err != nil {
		t.Fatal(err)
	}
	stop := errors.New("stop")
	calls := 0
	_, err = catalog.Scan(bytes.NewReader(data), -1, func(*catalog.Record) error { calls++; return stop })
	if !errors.Is(err, stop) || calls != 1 {
		t.Fatalf("Scan = %v after %d calls, want stop after 1", err, calls)
	}
	broken := errors.New("disk gone")
	_, err = catalog.Scan(io.MultiReader(bytes.NewReader(data[:100]), iotest.ErrReader(broken)), -1, func(*catalog.Record) error { return nil })
	if !errors.Is(err, broken) {
		t.Fatalf("Scan = %v, want the read error", err)
	}
}

// TestMergeIsMarshalOfTheWhole: Merge of an old catalog, the paths a plan
// read of it and the records the plan leaves there writes exactly what
// Marshal writes for the whole next catalog.
func TestMergeIsMarshalOfTheWhole(t *testing.T) {
	t.Parallel()
	rapid.Check(t, func(t *rapid.T) {
		old := catalogGen.Draw(t, "old")
		old.Sort()
		data, err := catalog.Marshal(old)
		if err != nil {
			t.Fatal(err)
		}
		next, dropped, want := drawMerge(t, old, nil)
		var got bytes.Buffer
		if err := catalog.Merge(&got, &pieces{data: data, n: rapid.IntRange(1, 64).Draw(t, "piece")}, layoutOf(t, data), next, dropped); err != nil {
			t.Fatalf("Merge: %v", err)
		}
		if !bytes.Equal(got.Bytes(), want) {
			t.Fatalf("Merge wrote\n%s\nMarshal of the whole\n%s", got.Bytes(), want)
		}
	})
}

// drawMerge draws what a plan leaves of the sorted catalog old: next (a
// head, records at new paths, replacements of records dropped), the
// paths dropped (those given, where no record need be, and the records
// drawn to go), sorted, and Marshal of the whole catalog that follows.
func drawMerge(t *rapid.T, old *catalog.Catalog, dropped []string) (*catalog.Catalog, []string, []byte) {
	next := catalogGen.Draw(t, "next")
	next.Outputs = slices.DeleteFunc(next.Outputs, func(o catalog.Output) bool {
		_, found := old.Lookup(o.Path)
		return found
	})
	var kept []catalog.Output
	for _, o := range old.Outputs {
		if rapid.Bool().Draw(t, "dropped") {
			dropped = append(dropped, o.Path)
			if rapid.Bool().Draw(t, "replaced") {
				next.Outputs = append(next.Outputs, outputGen(o.Path).Draw(t, "replacement"))
			}
			continue
		}
		kept = append(kept, o)
	}
	slices.Sort(dropped)
	whole := &catalog.Catalog{DistributorVersion: next.DistributorVersion, CreatedAt: next.CreatedAt, UpdatedAt: next.UpdatedAt,
		Outputs: append(slices.Clone(kept), next.Outputs...)}
	want, err := catalog.Marshal(whole)
	if err != nil {
		t.Fatal(err)
	}
	return next, dropped, want
}

// TestMergeRefusesAPathKeptAndNew: a record of next at the path of an old
// record not dropped would repeat the path.
func TestMergeRefusesAPathKeptAndNew(t *testing.T) {
	t.Parallel()
	old := seedExample(t)
	data, err := catalog.Marshal(old)
	if err != nil {
		t.Fatal(err)
	}
	next := old.Successor()
	next.Outputs = []catalog.Output{old.Outputs[0]}
	err = catalog.Merge(io.Discard, bytes.NewReader(data), layoutOf(t, data), next, nil)
	if !errors.Is(err, catalog.ErrInvalid) || !strings.Contains(err.Error(), "duplicate path") {
		t.Fatalf("Merge = %v, want a duplicate path", err)
	}
	if err := catalog.Merge(io.Discard, bytes.NewReader(data), layoutOf(t, data), next, []string{old.Outputs[0].Path}); err != nil {
		t.Fatalf("Merge with the path dropped: %v", err)
	}
}

// TestScanKeepsRecordsOfALongDocument: records kept while a document
// longer than the read window streams by (Keeper, Record.Keep) hold
// their values once the window has moved on.
func TestScanKeepsRecordsOfALongDocument(t *testing.T) {
	t.Parallel()
	c := benchCat(3000) // about 1.5 MB: many windows
	data, err := catalog.Marshal(c)
	if err != nil {
		t.Fatal(err)
	}
	for _, piece := range []int{1000, 100_000} {
		got, err := scanAll(data, piece)
		if err != nil {
			t.Fatal(err)
		}
		assertSameCatalog(t, got, c)
	}
}
