package planner

import (
	"fmt"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/distributor/distributor/catalog"
)

// Paths that nest, sort between each other in byte order ("a-c" between
// "a" and "a/b") and a few that Build must refuse.
var (
	refPaths = []string{"a", "a/b", "a/b/c", "a-c", "a.b", "a/c", "b", "b/x", "c/d", "c/e", "c/d/f", "g/h/i"}
	badPaths = []string{"", "/abs", "a//b", ".distributor.json", ".distributor/x", "x/../y", "bad\x01", `a\b`, "x/.distributor-tmp-1"}
	refT0    = time.Date(2026, 6, 19, 12, 0, 0, 0, time.UTC)
)

func refDigest(n int) string { return fmt.Sprintf("sha256:%064x", n) }

func drawRefSource(t *rapid.T, label string) catalog.Source {
	n := rapid.IntRange(0, 1).Draw(t, label)
	id := rapid.SampledFrom([]string{"src", "src2"}).Draw(t, label+" id") // two sources of one owner
	return catalog.Source{ID: id, Digest: refDigest(100 + n), Created: refT0.Add(time.Duration(n-1) * time.Hour)}
}

func drawRefOwner(t *rapid.T, label string) catalog.Owner {
	return rapid.SampledFrom([]catalog.Owner{{PipelineID: "p", DestinationID: "d"}, {PipelineID: "q", DestinationID: "d"}, {PipelineID: "p", DestinationID: "e"}}).Draw(t, label)
}

// drawRefCatalog draws a catalog (nil, legacy, sorted, unsorted or read
// by ParseOwned, as the engine reads it) and the stored objects.
func drawRefCatalog(t *rapid.T, in *Input) {
	in.Stored = map[string]Stored{}
	kind := rapid.IntRange(0, 4).Draw(t, "catalog")
	if kind == 1 {
		in.Legacy = true
	}
	var outs []catalog.Output
	for _, p := range refPaths {
		recorded := kind >= 2 && rapid.Bool().Draw(t, "recorded "+p)
		if recorded {
			o := in.Owner // mostly the publication's own records
			if rapid.IntRange(0, 2).Draw(t, "other owner "+p) == 0 {
				o = drawRefOwner(t, "owner "+p)
			}
			n := rapid.IntRange(0, 1).Draw(t, "n "+p)
			rec := catalog.Output{Path: p, PipelineID: o.PipelineID, DestinationID: o.DestinationID, Source: drawRefSource(t, "src "+p),
				Kind: catalog.KindSource, SHA256: refDigest(n), Size: int64(n), CreatedAt: refT0, UpdatedAt: refT0}
			if rapid.Bool().Draw(t, "generated "+p) {
				rec.Kind, rec.SourcePath, rec.Transform = catalog.KindGenerated, "in.md", "markdown_to_html"
			}
			if rapid.Bool().Draw(t, "url "+p) {
				rec.URL = "https://x.example/" + p
			}
			outs = append(outs, rec)
		}
		if !recorded && rapid.IntRange(0, 2).Draw(t, "unmanaged "+p) != 1 {
			continue // unmanaged content now and then
		}
		switch rapid.IntRange(0, 4).Draw(t, "stored "+p) {
		case 1, 2, 3:
			in.Stored[p] = Stored{Size: int64(rapid.IntRange(0, 1).Draw(t, "size "+p))}
		case 4:
			in.Stored[p] = Stored{Size: int64(rapid.IntRange(0, 1).Draw(t, "size "+p)), Damaged: true}
		}
	}
	if kind < 2 {
		return
	}
	c := &catalog.Catalog{DistributorVersion: "v1", CreatedAt: refT0.Add(-time.Hour), UpdatedAt: refT0, Outputs: outs}
	switch kind {
	case 3:
		c.Outputs = rapid.Permutation(outs).Draw(t, "records order")
	case 4:
		data, err := catalog.Marshal(c)
		if err != nil {
			t.Fatal(err)
		}
		if c, _, err = catalog.ParseOwned(data); err != nil {
			t.Fatal(err)
		}
	}
	in.Catalog = c
}

// drawRefDesired draws the publication's outputs: repeats, bad paths and
// bad fields now and then, in any order.
func drawRefDesired(t *rapid.T) []Desired {
	var ds []Desired
	nest := rapid.IntRange(0, 20).Draw(t, "nest") == 10 // a file and a folder: refused
	for i, p := range refPaths {
		if !rapid.Bool().Draw(t, "desired "+p) || !nest && slices.ContainsFunc(ds, func(d Desired) bool {
			return strings.HasPrefix(p, d.Path+"/") || strings.HasPrefix(d.Path, p+"/")
		}) {
			continue
		}
		switch rapid.IntRange(0, 80).Draw(t, "bad path "+p) - 40 {
		case 0:
			p = rapid.SampledFrom(badPaths).Draw(t, "which bad path "+p)
		case 1:
			p = rapid.SampledFrom(refPaths).Draw(t, "repeat "+p) // a duplicate, now and then
		}
		n := rapid.IntRange(0, 1).Draw(t, fmt.Sprint("n ", i))
		d := Desired{Path: p, From: p, Kind: catalog.KindSource, SHA256: refDigest(n), Size: int64(n)}
		if rapid.Bool().Draw(t, fmt.Sprint("generated ", i)) {
			d.Kind, d.From, d.Transform = catalog.KindGenerated, "in.md", "markdown_to_html"
		}
		if rapid.Bool().Draw(t, fmt.Sprint("url ", i)) {
			d.URL = "https://x.example/" + p
		}
		drawRefBadField(t, i, &d)
		ds = append(ds, d)
	}
	if !rapid.Bool().Draw(t, "manifest order") {
		ds = rapid.Permutation(ds).Draw(t, "order")
	}
	return ds
}

// drawRefBadField spoils one field of d now and then.
func drawRefBadField(t *rapid.T, i int, d *Desired) {
	// rapid favours the ends of a range: the rare cases sit in its middle.
	switch rapid.IntRange(0, 200).Draw(t, fmt.Sprint("bad field ", i)) - 100 {
	case 0:
		d.SHA256 = "sha256:XYZ"
	case 1:
		d.Size = -1
	case 2:
		d.Kind = "other"
	case 3:
		d.Kind, d.From, d.Transform = catalog.KindGenerated, "", "markdown_to_html"
	case 4:
		d.Kind, d.From, d.Transform = catalog.KindGenerated, "../in.md", "markdown_to_html"
	case 5:
		d.URL = "\xff"
	case 6:
		d.Kind, d.Transform = catalog.KindGenerated, "\xff"
	}
}

func drawRefInput(t *rapid.T) Input {
	in := Input{
		Owner: drawRefOwner(t, "owner"), Source: drawRefSource(t, "source"),
		Workflow: rapid.SampledFrom([]Workflow{Additive, Replacement}).Draw(t, "workflow"),
		Now:      refT0.Add(time.Hour), DistributorVersion: "v2",
		TakeOwnership: rapid.Bool().Draw(t, "take"), AllowOlder: rapid.IntRange(0, 3).Draw(t, "allow older") > 1,
		DeleteLater: rapid.Bool().Draw(t, "delete later"),
		MaxDeletes:  rapid.IntRange(0, 3).Draw(t, "max deletes"),
	}
	drawRefCatalog(t, &in)
	in.Desired = drawRefDesired(t)
	switch rapid.IntRange(0, 80).Draw(t, "bad input") - 40 {
	case 0:
		in.Source.Digest = "sha256:bad"
	case 1:
		in.Source.ID = ""
	case 2:
		in.Owner.PipelineID = ""
	case 3:
		in.Now = time.Time{}
	}
	return in
}

// Build makes exactly the plan, next catalog and error the planner made
// before its one-pass walk (refBuild, reference_test.go), whatever the
// order of the desired outputs and records, including the refusals. On a
// refusal only the items' order may differ: the reference left an empty
// replacement's deletes in the catalog's order, Build in path order.
func TestBuildMatchesReference(t *testing.T) {
	counts := map[string]int{}
	defer func() { t.Log(counts) }()
	rapid.Check(t, func(t *rapid.T) {
		in := drawRefInput(t)
		want, wantErr := refBuild(in)
		got, err := Build(in)
		if err != nil {
			counts[regexp.MustCompile(`"[^"]*"`).ReplaceAllString(err.Error(), "")]++
		} else {
			counts[fmt.Sprint(got.Next != nil, got.Superseded != nil)]++
		}
		if fmt.Sprint(err) != fmt.Sprint(wantErr) {
			t.Fatalf("error %v, reference %v", err, wantErr)
		}
		if err != nil {
			byPath := func(a, b Item) int { return strings.Compare(a.Path, b.Path) }
			slices.SortStableFunc(want.Items, byPath)
			slices.SortStableFunc(got.Items, byPath)
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("plan differs from the reference\n got: %+v\nwant: %+v", got, want)
		}
		if got.Next != nil && !slices.IsSortedFunc(got.Next.Outputs, func(a, b catalog.Output) int { return strings.Compare(a.Path, b.Path) }) {
			t.Fatalf("next catalog's records are not in path order")
		}
	})
}

// plainPath accepts only paths catalog.ValidateOutputPath accepts, and
// accepts the plain ones a manifest is made of.
func TestPlainPathsAreValid(t *testing.T) {
	for _, p := range []string{"a", "a/b.html", "reports/2026/06/index.html", "a-b_c~d/e f/g+h=i@j"} {
		if !plainPath(p) {
			t.Errorf("plainPath(%q) = false", p)
		}
	}
	for _, p := range append(badPaths, "a/", "a/.b", ".b", "a/..", "é", "a\x7f", strings.Repeat("a", catalog.MaxPathLen+1)) {
		if plainPath(p) {
			t.Errorf("plainPath(%q) = true", p)
		}
	}
	alphabet := []rune{'a', 'B', '/', '.', '-', '\\', 0, 0x1f, 0x7f, 0x85, 'é', 'K', ' ', '~'}
	rapid.Check(t, func(t *rapid.T) {
		p := rapid.StringOf(rapid.SampledFrom(alphabet)).Draw(t, "p")
		if rapid.Bool().Draw(t, "reserved") {
			p = rapid.SampledFrom([]string{".distributor.json", ".distributor/", ".DISTRIBUTOR/", "x/.distributor-tmp-", "\u212a/"}).Draw(t, "prefix") + p
		}
		if err := catalog.ValidateOutputPath(p); plainPath(p) && err != nil {
			t.Fatalf("plainPath(%q) = true, but: %v", p, err)
		}
	})
}

// The places of the desired paths among the records are the same found in
// the owner's pass (a republish) or searched for (a few paths).
func TestPlacesMergedAreSearched(t *testing.T) {
	universe := append(slices.Clone(refPaths), "0", "z", "a/b/d", "c", "c/d/f/g")
	rapid.Check(t, func(t *rapid.T) {
		var outs []catalog.Output
		var ds []*Desired
		for _, p := range universe {
			if rapid.Bool().Draw(t, "recorded "+p) {
				outs = append(outs, catalog.Output{Path: p})
			}
			if rapid.Bool().Draw(t, "desired "+p) {
				ds = append(ds, &Desired{Path: p})
			}
		}
		slices.SortFunc(outs, func(a, b catalog.Output) int { return strings.Compare(a.Path, b.Path) })
		slices.SortFunc(ds, func(a, b *Desired) int { return strings.Compare(a.Path, b.Path) })
		if ds == nil {
			ds = []*Desired{}
		}
		_, _, merged := ownRecords(Input{}, outs, ds, true)
		if searched := places(ds, outs); !reflect.DeepEqual(merged, searched) {
			t.Fatalf("merged %v, searched %v", merged, searched)
		}
	})
}
