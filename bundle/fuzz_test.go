package bundle

import (
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"
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
	f.Add([]byte("{\n  \"schema_version\": 1,\n          \"id\": \"x\",\t\r\n \"created\":\"2026-06-19T12:00:00Z\",\n\n        \t  \"files\": [ {\"path\": \"r\u00e9/\xc3\xbc.txt\", \"sha256\": \"sha256:90f8ec5669cd34183b9b0fdf8b94f5efb4c3672876330f4aa76088c2b4ad17be\", \"size\": 8}]}       "))
	f.Add([]byte("{\"schema_version\":1,\"id\":\"\xff\xfe\",\"created\":\"2026-06-19T12:00:00Z\",\"files\":[]}"))
	f.Add([]byte("{\"schema_version\":1,\"id\":\"a\x01b\",\"created\":\"2026-06-19T12:00:00Z\",\"files\":[]}"))
	f.Add([]byte(`{"schema_version":1,"id":"x","created":"2026-06-19T12:00:00Z","files":[{"path":"b","sha256":"sha256:90f8ec5669cd34183b9b0fdf8b94f5efb4c3672876330f4aa76088c2b4ad17be","size":8},{"path":"a","sha256":"sha256:90f8ec5669cd34183b9b0fdf8b94f5efb4c3672876330f4aa76088c2b4ad17be","size":8}]}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		m, err := ParseManifest(data)
		// The fast reader decides nothing the encoding/json reader would
		// decide otherwise.
		if rm, rerr := parseManifestReference(data); !reflect.DeepEqual(m, rm) || fmt.Sprint(err) != fmt.Sprint(rerr) {
			t.Fatalf("ParseManifest = %+v, %v; reference %+v, %v", m, err, rm, rerr)
		}
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

// TestParseManifestFastPath: written manifests take the fast reader, sorted
// or not, and it returns exactly what the encoding/json reader returns; odd
// inputs are left to the reference (same result, same message).
func TestParseManifestFastPath(t *testing.T) {
	const sum = "sha256:90f8ec5669cd34183b9b0fdf8b94f5efb4c3672876330f4aa76088c2b4ad17be"
	m := Manifest{SchemaVersion: 1, ID: "w.t", Created: time.Date(2026, 6, 19, 14, 0, 0, 5, time.FixedZone("", 7200)),
		Files: []File{{Path: "b/c", SHA256: sum, Size: 8}, {Path: "a", SHA256: sum, Size: 0}, {Path: `q"uote`, SHA256: sum, Size: 1}}}
	written, err := m.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	fast, ok := parseManifestFast(written)
	ref, rerr := parseManifestReference(written)
	if !ok || rerr != nil || !reflect.DeepEqual(fast, ref) {
		t.Fatalf("fast = %+v, %v; reference %+v, %v", fast, ok, ref, rerr)
	}
	for name, in := range map[string]string{
		"duplicate path":  strings.Replace(string(written), `"path": "a"`, `"path": "b/c"`, 1),
		"cased key":       strings.Replace(string(written), `"size": 8`, `"Size": 8`, 1),
		"blank id":        strings.Replace(string(written), `"id": "w.t"`, `"id": " "`, 1),
		"negative size":   strings.Replace(string(written), `"size": 8`, `"size": -8`, 1),
		"float size":      strings.Replace(string(written), `"size": 8`, `"size": 8.0`, 1),
		"bad digest":      strings.Replace(string(written), sum, "sha256:00", 1),
		"reserved path":   strings.Replace(string(written), `"path": "a"`, `"path": "manifest.json"`, 1),
		"schema 2":        strings.Replace(string(written), `"schema_version": 1`, `"schema_version": 2`, 1),
		"trailing object": string(written) + "{}",
	} {
		if _, ok := parseManifestFast([]byte(in)); ok {
			t.Errorf("%s: the fast reader accepted it", name)
		}
		got, err := ParseManifest([]byte(in))
		want, werr := parseManifestReference([]byte(in))
		if !reflect.DeepEqual(got, want) || fmt.Sprint(err) != fmt.Sprint(werr) {
			t.Errorf("%s: ParseManifest = %+v, %v; reference %+v, %v", name, got, err, want, werr)
		}
	}
}

// TestCreateRefusesWhatOpenRefuses: Create refuses, naming the reason, a
// manifest over the size Open reads, and accepts one exactly at it.
func TestCreateRefusesWhatOpenRefuses(t *testing.T) {
	if err := checkManifestSize(MaxManifestSize, 1_500_000, MaxManifestSize); err != nil {
		t.Fatalf("at the limit: %v", err)
	}
	err := checkManifestSize(MaxManifestSize+1, 1_500_000, MaxManifestSize)
	want := "invalid manifest: the manifest of 1500000 files would take 257 MiB, over the 256 MiB a bundle's manifest may have; split the folder into several bundles"
	if !errors.Is(err, ErrInvalidManifest) || err.Error() != want {
		t.Fatalf("over the limit: %v, want %q", err, want)
	}
}
