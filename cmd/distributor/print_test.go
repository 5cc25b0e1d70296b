package main

import (
	"bytes"
	"fmt"
	"strings"
	"testing"

	"github.com/distributor/distributor/config"
	"github.com/distributor/distributor/planner"
	"github.com/distributor/distributor/service"
)

// countingWriter counts the writes made to it.
type countingWriter struct {
	bytes.Buffer
	writes int
}

func (c *countingWriter) Write(p []byte) (int, error) {
	c.writes++
	return c.Buffer.Write(p)
}

// TestResultOfManyUpdatesIsWrittenInFewWrites: a republish that updates
// 10,000 records lists every one when stdout is not a terminal; the lines
// go out in writes of up to 64 KiB, not one write each.
func TestResultOfManyUpdatesIsWrittenInFewWrites(t *testing.T) {
	var out countingWriter
	a := newApp(&out, &bytes.Buffer{})
	var res service.Result
	var want strings.Builder
	want.WriteString("latest (/srv/site, replacement)\n")
	for i := range 10_000 {
		it := planner.Item{Path: fmt.Sprintf("dir%02d/file%05d.bin", i%50, i), Action: planner.Update}
		res.Plan.Items = append(res.Plan.Items, it)
		res.Updated = append(res.Updated, it)
		fmt.Fprintf(&want, "  ~ %s (record only)\n", it.Path)
	}
	res.Root = "/srv/site"
	want.WriteString("  0 create, 10000 update, 0 unchanged, 0 delete, 0 collision\n")
	a.printResult(config.Destination{ID: "latest", Workflow: "replacement"}, res, nil, false)
	if got := out.String(); got != want.String() {
		t.Fatalf("output differs: got %d bytes, want %d", len(got), want.Len())
	}
	if max := want.Len()/(64<<10) + 1; out.writes > max {
		t.Errorf("%d writes for %d bytes, want at most %d", out.writes, want.Len(), max)
	}
}
