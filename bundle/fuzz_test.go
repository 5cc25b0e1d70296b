package bundle

import (
	"testing"
)

// FuzzParseManifest: no input panics, and whatever parses re-marshals to a
// manifest that parses to the same thing.
func FuzzParseManifest(f *testing.F) {
	f.Add([]byte(`{"schema_version":1,"id":"w.t","created":"2026-06-19T12:00:00Z","files":[{"path":"report.md","sha256":"sha256:90f8ec5669cd34183b9b0fdf8b94f5efb4c3672876330f4aa76088c2b4ad17be","size":8}]}`))
	f.Add([]byte(`{"schema_version":1,"id":"x","created":"2026-06-19T12:00:00+02:00","files":[]}`))
	f.Add([]byte(`{"schema_version":1,"id":"x","created":"2026-06-19T12:00:00Z","files":[{"path":"../x","sha256":"sha256:00","size":-1}]}`))
	f.Add([]byte(`{"schema_version":1,"id":"x","id":"y","created":"2026-06-19T12:00:00Z","files":[]}`))
	f.Add([]byte(`{"schema_version":1,"id":"x","created":"2026-06-19T12:00:00Z","files":[{"path":"a","PATH":"b","sha256":"sha256:90f8ec5669cd34183b9b0fdf8b94f5efb4c3672876330f4aa76088c2b4ad17be","size":8}]}`))
	f.Add([]byte(`[]`))
	f.Fuzz(func(t *testing.T, data []byte) {
		m, err := ParseManifest(data)
		if err != nil {
			return
		}
		out, err := m.Marshal()
		if err != nil {
			t.Fatalf("parsed manifest does not marshal: %v", err)
		}
		m2, err := ParseManifest(out)
		if err != nil {
			t.Fatalf("re-marshalled manifest does not parse: %v\n%s", err, out)
		}
		if m2.ID != m.ID || !m2.Created.Equal(m.Created) || len(m2.Files) != len(m.Files) {
			t.Fatalf("round trip changed the manifest:\n%+v\n%+v", m, m2)
		}
	})
}
