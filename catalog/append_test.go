package catalog

import (
	"bytes"
	"testing"
	"time"
)

// AppendOutputs writes exactly the outputs array of Marshal, escapes,
// generated records and sub-second times included.
func TestAppendOutputsMatchesMarshal(t *testing.T) {
	t.Parallel()
	created := time.Date(2026, 12, 3, 7, 0, 0, 123456789, time.UTC)
	digest := "sha256:" + string(bytes.Repeat([]byte("ab"), 32))
	rec := func(p string) Output {
		return Output{Path: p, PipelineID: "p<&>", DestinationID: "d\u2028", Kind: KindSource,
			Source: Source{ID: "b\"1", Digest: digest, Created: created}, SHA256: digest, Size: 42,
			CreatedAt: created, UpdatedAt: created.Add(time.Second)}
	}
	gen := rec("c/index.html")
	gen.Kind, gen.SourcePath, gen.Transform, gen.URL = KindGenerated, "c/index.md", "markdown", "https://x/c/"
	for _, outs := range [][]Output{nil, {rec("a")}, {rec("a"), rec("b/é \"q\""), gen}} {
		cat := &Catalog{CreatedAt: created, UpdatedAt: created, Outputs: outs}
		data, err := Marshal(cat)
		if err != nil {
			t.Fatal(err)
		}
		i := bytes.Index(data, []byte(`"outputs": `)) + len(`"outputs": `)
		want := data[i : bytes.LastIndexByte(data, ']')+1]
		if got := AppendOutputs([]byte("x"), outs); !bytes.Equal(got, append([]byte("x"), want...)) {
			t.Fatalf("%d records:\n got %s\nwant x%s", len(outs), got, want)
		}
	}
}
