package catalog

import (
	"bytes"
	"encoding/json"
	"io"
)

// ParseReference is Parse through encoding/json only.
var ParseReference = parseReference

// ParseFast is the fast reader alone; ok false means it left the input to
// the reference decoder.
var ParseFast = parseFast

type refSource struct {
	ID      string `json:"id"`
	Digest  string `json:"digest"`
	Created string `json:"created"`
}

type refOutput struct {
	Path          string    `json:"path"`
	PipelineID    string    `json:"pipeline_id"`
	DestinationID string    `json:"destination_id"`
	Source        refSource `json:"source"`
	Kind          string    `json:"kind"`
	SourcePath    string    `json:"source_path,omitempty"`
	Transform     string    `json:"transform,omitempty"`
	SHA256        string    `json:"sha256"`
	Size          int64     `json:"size"`
	CreatedAt     string    `json:"created_at"`
	UpdatedAt     string    `json:"updated_at"`
	URL           string    `json:"url,omitempty"`
}

type refState struct {
	Mode string `json:"mode"`
}

type refCatalog struct {
	SchemaVersion      int         `json:"schema_version"`
	DistributorVersion string      `json:"distributor_version,omitempty"`
	CreatedAt          string      `json:"created_at"`
	UpdatedAt          string      `json:"updated_at"`
	State              refState    `json:"state"`
	Outputs            []refOutput `json:"outputs"`
}

// MarshalReference is the encoding/json writer the catalog format was
// defined with; Marshal must produce its bytes exactly.
func MarshalReference(c *Catalog) ([]byte, error) {
	cp := *c
	cp.Outputs = append([]Output(nil), c.Outputs...)
	cp.Sort()
	if err := cp.Validate(); err != nil {
		return nil, err
	}
	w := refCatalog{
		SchemaVersion: SchemaVersion, DistributorVersion: cp.DistributorVersion,
		CreatedAt: FormatTime(cp.CreatedAt), UpdatedAt: FormatTime(cp.UpdatedAt),
		State: refState{Mode: ModeCatalog}, Outputs: make([]refOutput, 0, len(cp.Outputs)),
	}
	for _, o := range cp.Outputs {
		w.Outputs = append(w.Outputs, refOutput{
			Path: o.Path, PipelineID: o.PipelineID, DestinationID: o.DestinationID,
			Source: refSource{ID: o.Source.ID, Digest: o.Source.Digest, Created: FormatTime(o.Source.Created)},
			Kind:   o.Kind, SourcePath: o.SourcePath, Transform: o.Transform,
			SHA256: o.SHA256, Size: o.Size,
			CreatedAt: FormatTime(o.CreatedAt), UpdatedAt: FormatTime(o.UpdatedAt), URL: o.URL,
		})
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	if err := enc.Encode(w); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// ScanBlocks is ScanLayout of a document in blocks of about blockSize
// bytes, whatever its size.
func ScanBlocks(r io.Reader, blockSize int, lay *Layout, pick func(*Output) bool) (Head, []Output, error) {
	return scanBlocks(r, blockSize, lay, pick)
}

// Offsets is where each record of the layout starts, and where the last
// one ends.
func (l *Layout) Offsets() ([]int64, int64) { return l.offs, l.end }

// NewSparseLayoutOf is NewSparseLayout with runs of about runBytes.
func NewSparseLayoutOf(runBytes int64) *Layout { return newSparseLayout(runBytes) }
