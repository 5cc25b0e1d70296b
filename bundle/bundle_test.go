package bundle

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/distributor/distributor/catalog"
	"github.com/distributor/distributor/storage"
	"github.com/distributor/distributor/storage/local"
)

var created = time.Date(2026, 6, 19, 12, 0, 0, 0, time.UTC)

const (
	helloSHA = "sha256:5891b5b522d5df086d0ff0b110fbd9d21bb4fc7163af34d08286a2e846f6be03" // "hello\n"
	emptySHA = "sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
)

func writeTree(t *testing.T, dir string, files map[string]string) {
	t.Helper()
	for p, content := range files {
		name := filepath.Join(dir, filepath.FromSlash(p))
		must(t, os.MkdirAll(filepath.Dir(name), 0o755))
		must(t, os.WriteFile(name, []byte(content), 0o644))
	}
}

// makeBundle writes files to a temp folder, creates its manifest and opens it.
func makeBundle(t *testing.T, files map[string]string) (string, *Bundle) {
	t.Helper()
	dir := t.TempDir()
	writeTree(t, dir, files)
	_, data, err := Create(t.Context(), dir, "weatherreporter.tomorrow", created)
	must(t, err)
	store, err := local.New(dir)
	must(t, err)
	b, err := Open(t.Context(), store, dir, Digest(data), 0)
	must(t, err)
	return dir, b
}

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func wantErr(t *testing.T, err error, sentinel error, msg string) {
	t.Helper()
	if !errors.Is(err, sentinel) {
		t.Fatalf("error = %v, want one wrapping %v", err, sentinel)
	}
	if err.Error() != msg {
		t.Fatalf("error = %s\nwant    %s", err, msg)
	}
}

func manifestJSON(files string) string {
	return `{"schema_version":1,"id":"w.t","created":"2026-06-19T12:00:00Z","files":[` + files + `]}`
}

func TestParseManifestErrors(t *testing.T) {
	good := `{"path":"a.txt","sha256":"` + helloSHA + `","size":6}`
	tests := []struct {
		name, data, want string
	}{
		{"traversal", manifestJSON(`{"path":"../x","sha256":"` + helloSHA + `","size":6}`),
			`invalid manifest: files[0]: invalid path "../x": has a ".." segment`},
		{"absolute", manifestJSON(good + `,{"path":"/etc/passwd","sha256":"` + helloSHA + `","size":6}`),
			`invalid manifest: files[1]: invalid path "/etc/passwd": absolute; paths must be relative to the bundle or root`},
		{"duplicate", manifestJSON(good + `,` + good),
			`invalid manifest: files[1] "a.txt": duplicate path (also files[0])`},
		{"catalog name", manifestJSON(`{"path":".distributor.json","sha256":"` + helloSHA + `","size":6}`),
			`invalid manifest: files[0]: invalid path ".distributor.json": reserved for distributor's own state (.distributor.json, .distributor/)`},
		{"reserved folder", manifestJSON(`{"path":".distributor/lock","sha256":"` + helloSHA + `","size":6}`),
			`invalid manifest: files[0]: invalid path ".distributor/lock": reserved for distributor's own state (.distributor.json, .distributor/)`},
		{"lists itself", manifestJSON(`{"path":"manifest.json","sha256":"` + helloSHA + `","size":6}`),
			`invalid manifest: files[0]: invalid path "manifest.json": the manifest cannot list itself`},
		{"bad digest", manifestJSON(`{"path":"a.txt","sha256":"sha256:ABC","size":6}`),
			`invalid manifest: files[0] "a.txt": sha256 "sha256:ABC" must be sha256:<64 lowercase hex>`},
		{"md5 digest", manifestJSON(`{"path":"a.txt","sha256":"md5:b1946ac92492d2347c6235b4d2611184","size":6}`),
			`invalid manifest: files[0] "a.txt": sha256 "md5:b1946ac92492d2347c6235b4d2611184" must be sha256:<64 lowercase hex>`},
		{"negative size", manifestJSON(`{"path":"a.txt","sha256":"` + helloSHA + `","size":-1}`),
			`invalid manifest: files[0] "a.txt": size -1 is negative`},
		{"missing size", manifestJSON(`{"path":"a.txt","sha256":"` + helloSHA + `"}`),
			`invalid manifest: files[0] "a.txt": size is missing`},
		{"missing sha", manifestJSON(`{"path":"a.txt","size":6}`),
			`invalid manifest: files[0] "a.txt": sha256 is missing`},
		{"missing path", manifestJSON(`{"sha256":"` + helloSHA + `","size":6}`),
			`invalid manifest: files[0]: path is missing`},
		{"unknown file field", manifestJSON(`{"path":"a.txt","sha256":"` + helloSHA + `","size":6,"mode":420}`),
			`invalid manifest: json: unknown field "mode"`},
		{"unknown field", `{"schema_version":1,"id":"w.t","created":"2026-06-19T12:00:00Z","files":[],"owner":"x"}`,
			`invalid manifest: json: unknown field "owner"`},
		{"schema 2", `{"schema_version":2,"id":"w.t","created":"2026-06-19T12:00:00Z","files":[]}`,
			`invalid manifest: schema_version 2 is not supported (this distributor reads 1)`},
		{"no schema", `{"id":"w.t","created":"2026-06-19T12:00:00Z","files":[]}`,
			`invalid manifest: schema_version is missing`},
		{"empty id", `{"schema_version":1,"id":" ","created":"2026-06-19T12:00:00Z","files":[]}`,
			`invalid manifest: id is missing or empty`},
		{"id over the limit", `{"schema_version":1,"id":"` + strings.Repeat("x", 257) + `","created":"2026-06-19T12:00:00Z","files":[]}`,
			`invalid manifest: id "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx…" is 257 bytes, over the limit of 256`},
		{"id with a terminal escape", `{"schema_version":1,"id":"w.t\u001b]0;owned\u0007","created":"2026-06-19T12:00:00Z","files":[]}`,
			`invalid manifest: id "w.t\x1b]0;owned\a" contains control characters, which are not allowed`},
		{"id with a C1 control", `{"schema_version":1,"id":"w.t\u009b2J","created":"2026-06-19T12:00:00Z","files":[]}`,
			`invalid manifest: id "w.t\u009b2J" contains control characters, which are not allowed`},
		{"bad created", `{"schema_version":1,"id":"w.t","created":"yesterday","files":[]}`,
			`invalid manifest: created "yesterday" is not an RFC 3339 time (like 2026-06-19T12:00:00Z)`},
		{"no files", `{"schema_version":1,"id":"w.t","created":"2026-06-19T12:00:00Z"}`,
			`invalid manifest: files is missing`},
		{"trailing", manifestJSON(good) + `{}`,
			`invalid manifest: trailing data after the JSON object`},
		{"not json", `schema_version: 1`,
			`invalid manifest: invalid character 's' looking for beginning of value`},
		// encoding/json would keep the last of repeated keys.
		{"duplicate top-level key", `{"schema_version":1,"id":"w.t","id":"w.u","created":"2026-06-19T12:00:00Z","files":[]}`,
			`invalid manifest: duplicate key "id": the producer must write each key once per object`},
		{"duplicate files", `{"schema_version":1,"id":"w.t","created":"2026-06-19T12:00:00Z","files":[],"files":[` + good + `]}`,
			`invalid manifest: duplicate key "files": the producer must write each key once per object`},
		{"duplicate key in a file entry", manifestJSON(good + `,{"path":"b.txt","sha256":"` + helloSHA + `","size":6,"size":0}`),
			`invalid manifest: duplicate key "size" in files[1]: the producer must write each key once per object`},
		{"duplicate key other case", manifestJSON(`{"path":"a.txt","Path":"b.txt","sha256":"` + helloSHA + `","size":6}`),
			`invalid manifest: duplicate key "Path" in files[0]: the producer must write each key once per object`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParseManifest([]byte(tc.data))
			wantErr(t, err, ErrInvalidManifest, tc.want)
		})
	}
	_, err := ParseManifest([]byte(manifestJSON(`{"path":"../x","sha256":"` + helloSHA + `","size":6}`)))
	if !errors.Is(err, catalog.ErrBadPath) {
		t.Errorf("path error %v does not wrap catalog.ErrBadPath", err)
	}
}

func TestParseManifest(t *testing.T) {
	m, err := ParseManifest([]byte(`{"schema_version":1,"id":"w.t","created":"2026-06-19T14:00:00+02:00","files":[
		{"path":"b/c.md","sha256":"` + helloSHA + `","size":6},{"path":"a.txt","sha256":"` + emptySHA + `","size":0}]}`))
	must(t, err)
	want := Manifest{SchemaVersion: 1, ID: "w.t", Created: m.Created, Files: []File{
		{"b/c.md", helloSHA, 6}, {"a.txt", emptySHA, 0}}}
	if !reflect.DeepEqual(m, want) || !m.Created.Equal(created) {
		t.Fatalf("ParseManifest = %+v, want %+v at %v", m, want, created)
	}
}

func TestCreate(t *testing.T) {
	dir := t.TempDir()
	writeTree(t, dir, map[string]string{
		"report.md":           "hello\n",
		"a/b.txt":             "",
		"a.txt":               "hello\n",
		"sub/manifest.json":   "hello\n", // only the top-level manifest is skipped
		".hidden/x":           "hello\n",
		"manifest.json":       "stale manifest, replaced",
		"dir with space/ü.md": "hello\n",
	})
	m, data, err := Create(t.Context(), dir, "weatherreporter.tomorrow", created.In(time.FixedZone("X", 3600)))
	must(t, err)
	want := `{
  "schema_version": 1,
  "id": "weatherreporter.tomorrow",
  "created": "2026-06-19T12:00:00Z",
  "files": [
    {
      "path": ".hidden/x",
      "sha256": "` + helloSHA + `",
      "size": 6
    },
    {
      "path": "a.txt",
      "sha256": "` + helloSHA + `",
      "size": 6
    },
    {
      "path": "a/b.txt",
      "sha256": "` + emptySHA + `",
      "size": 0
    },
    {
      "path": "dir with space/ü.md",
      "sha256": "` + helloSHA + `",
      "size": 6
    },
    {
      "path": "report.md",
      "sha256": "` + helloSHA + `",
      "size": 6
    },
    {
      "path": "sub/manifest.json",
      "sha256": "` + helloSHA + `",
      "size": 6
    }
  ]
}
`
	if string(data) != want {
		t.Fatalf("manifest =\n%s\nwant\n%s", data, want)
	}
	onDisk, err := os.ReadFile(filepath.Join(dir, ManifestName))
	must(t, err)
	if !bytes.Equal(onDisk, data) {
		t.Fatal("manifest.json on disk differs from the returned bytes")
	}
	parsed, err := ParseManifest(data)
	must(t, err)
	if !reflect.DeepEqual(parsed, m) {
		t.Fatalf("ParseManifest(Create bytes) = %+v, want %+v", parsed, m)
	}
	// Running again (now with manifest.json present) gives the same bytes.
	_, again, err := Create(t.Context(), dir, "weatherreporter.tomorrow", created)
	must(t, err)
	if !bytes.Equal(again, data) {
		t.Fatal("second Create gave other bytes")
	}
	// Only manifest.json is in the folder besides the files: no temp left.
	entries, err := os.ReadDir(dir)
	must(t, err)
	if len(entries) != 7 {
		t.Fatalf("folder has %d entries, want 7 (6 top-level names + manifest.json)", len(entries))
	}
}

func TestCreateDeterministic(t *testing.T) {
	files := map[string]string{"z": "1", "a/z": "2", "a-b": "3", "a.b": "4", "m/n/o": "5"}
	var outputs [][]byte
	for range 2 {
		dir := t.TempDir()
		writeTree(t, dir, files) // map order: files are written in another order each time
		_, data, err := Create(t.Context(), dir, "w.t", created)
		must(t, err)
		outputs = append(outputs, data)
	}
	if !bytes.Equal(outputs[0], outputs[1]) {
		t.Fatalf("same tree, other bytes:\n%s\n%s", outputs[0], outputs[1])
	}
	m, err := ParseManifest(outputs[0])
	must(t, err)
	var paths []string
	for _, f := range m.Files {
		paths = append(paths, f.Path)
	}
	if got := strings.Join(paths, " "); got != "a-b a.b a/z m/n/o z" {
		t.Fatalf("paths = %s, want whole-path byte order", got)
	}
}

func TestCreateRefuses(t *testing.T) {
	t.Run("symlink", func(t *testing.T) {
		dir := t.TempDir()
		writeTree(t, dir, map[string]string{"a": "x"})
		must(t, os.Symlink("a", filepath.Join(dir, "link")))
		_, _, err := Create(t.Context(), dir, "w.t", created)
		want := fmt.Sprintf("bundle create %s: %s is a symlink: bundles hold regular files only; copy the target in", dir, filepath.Join(dir, "link"))
		if err == nil || err.Error() != want {
			t.Fatalf("error = %v\nwant    %s", err, want)
		}
		if _, err := os.Stat(filepath.Join(dir, ManifestName)); !os.IsNotExist(err) {
			t.Fatalf("manifest written despite the error: %v", err)
		}
	})
	t.Run("reserved", func(t *testing.T) {
		dir := t.TempDir()
		writeTree(t, dir, map[string]string{".distributor.json": "{}"})
		_, _, err := Create(t.Context(), dir, "w.t", created)
		if !errors.Is(err, catalog.ErrBadPath) || !strings.Contains(err.Error(), `".distributor.json": reserved`) {
			t.Fatalf("error = %v, want a reserved path error", err)
		}
	})
	t.Run("long id", func(t *testing.T) {
		dir := t.TempDir()
		_, _, err := Create(t.Context(), dir, strings.Repeat("é", 129), created)
		want := `bundle create: invalid manifest: id "` + strings.Repeat("é", 16) + `…" is 258 bytes, over the limit of 256`
		if err == nil || err.Error() != want {
			t.Fatalf("error = %v\nwant    %s", err, want)
		}
		if _, err := os.Stat(filepath.Join(dir, ManifestName)); !os.IsNotExist(err) {
			t.Fatalf("manifest written despite the error: %v", err)
		}
	})
	t.Run("control id", func(t *testing.T) {
		_, _, err := Create(t.Context(), t.TempDir(), "w\x1b[2J", created)
		want := `bundle create: invalid manifest: id "w\x1b[2J" contains control characters, which are not allowed`
		if err == nil || err.Error() != want {
			t.Fatalf("error = %v\nwant    %s", err, want)
		}
	})
	t.Run("empty id", func(t *testing.T) {
		_, _, err := Create(t.Context(), t.TempDir(), "", created)
		if err == nil || err.Error() != "bundle create: the source id is empty: pass --id" {
			t.Fatalf("error = %v", err)
		}
	})
}

func TestOpen(t *testing.T) {
	dir, b := makeBundle(t, map[string]string{"report.md": "hello\n"})
	data, err := os.ReadFile(filepath.Join(dir, ManifestName))
	must(t, err)
	if b.Digest != Digest(data) || b.Location != dir || b.Manifest.ID != "weatherreporter.tomorrow" {
		t.Fatalf("bundle = %+v", b)
	}
	if f, ok := b.File("report.md"); !ok || f != (File{"report.md", helloSHA, 6}) {
		t.Fatalf("File(report.md) = %+v, %v", f, ok)
	}
	if _, ok := b.File("nope"); ok {
		t.Fatal("File(nope) found")
	}
	store, err := local.New(dir)
	must(t, err)

	// Any digest accepted when none is wanted.
	_, err = Open(t.Context(), store, "", "", 0)
	must(t, err)

	// The event announced another manifest.
	other := "sha256:" + strings.Repeat("0", 64)
	_, err = Open(t.Context(), store, "s3://b/p/", other, 0)
	wantErr(t, err, ErrDigestMismatch, fmt.Sprintf(
		"bundle s3://b/p/: manifest digest does not match: manifest.json has %s, expected %s; the bundle changed after it was announced",
		Digest(data), other))

	// No manifest.
	empty, err := local.New(t.TempDir())
	must(t, err)
	_, err = Open(t.Context(), empty, "/srv/b", "", 0)
	wantErr(t, err, ErrNoManifest, "bundle /srv/b: no manifest.json: is this a bundle? write one with `distributor bundle create`")

	// An invalid manifest.
	must(t, os.WriteFile(filepath.Join(dir, ManifestName), []byte(manifestJSON(`{"path":"../x","sha256":"`+helloSHA+`","size":6}`)), 0o644))
	_, err = Open(t.Context(), store, "/srv/b", "", 0)
	wantErr(t, err, ErrInvalidManifest, `bundle /srv/b: invalid manifest: files[0]: invalid path "../x": has a ".." segment`)
}

// tamper replaces a file's bytes behind the manifest's back.
func tamper(t *testing.T, dir, p, content string) {
	t.Helper()
	must(t, os.WriteFile(filepath.Join(dir, filepath.FromSlash(p)), []byte(content), 0o644))
}

func TestBundleOpenVerifies(t *testing.T) {
	dir, b := makeBundle(t, map[string]string{"same": "hello\n", "short": "hello\n", "long": "hello\n", "ok": "hello\n", "gone": "hello\n"})
	tamper(t, dir, "same", "HELLO\n")
	tamper(t, dir, "short", "hell")
	tamper(t, dir, "long", "hello\n"+strings.Repeat("x", 1<<20))
	must(t, os.Remove(filepath.Join(dir, "gone")))

	read := func(p string) ([]byte, error) {
		rc, err := b.Open(t.Context(), p)
		if err != nil {
			return nil, err
		}
		defer rc.Close()
		return io.ReadAll(rc)
	}
	data, err := read("ok")
	if err != nil || string(data) != "hello\n" {
		t.Fatalf("ok: %q, %v", data, err)
	}
	_, err = read("same")
	wantErr(t, err, ErrContentMismatch, fmt.Sprintf(`bundle %s: "same": file content does not match the manifest: sha256 is %s, the manifest says %s`,
		dir, Digest([]byte("HELLO\n")), helloSHA))
	_, err = read("short")
	wantErr(t, err, ErrContentMismatch, fmt.Sprintf(`bundle %s: "short": file content does not match the manifest: 4 bytes, the manifest says 6`, dir))
	data, err = read("long")
	wantErr(t, err, ErrContentMismatch, fmt.Sprintf(`bundle %s: "long": file content does not match the manifest: more than the manifest's 6 bytes`, dir))
	if len(data) > 6 {
		t.Fatalf("read %d bytes of a file the manifest says has 6", len(data))
	}
	_, err = read("gone")
	wantErr(t, err, ErrMissingFile, fmt.Sprintf(`bundle %s: "gone": file listed in the manifest is missing`, dir))
	_, err = read("unlisted")
	wantErr(t, err, ErrNotListed, fmt.Sprintf(`bundle %s: "unlisted": not listed in the manifest`, dir))

	// Copying a damaged file into a destination commits nothing.
	dest, err := local.New(t.TempDir())
	must(t, err)
	for _, p := range []string{"same", "short", "long"} {
		rc, err := b.Open(t.Context(), p)
		must(t, err)
		f, _ := b.File(p)
		_, err = dest.Put(t.Context(), "out/"+p, rc, f.Size, storage.PutOptions{SHA256: f.SHA256})
		rc.Close()
		if !errors.Is(err, ErrContentMismatch) {
			t.Errorf("Put of damaged %q: %v, want ErrContentMismatch", p, err)
		}
	}
	var listed []string
	must(t, dest.List(t.Context(), "", func(oi storage.ObjectInfo) error { listed = append(listed, oi.Path); return nil }))
	if len(listed) != 0 {
		t.Fatalf("destination holds %q after failed copies", listed)
	}
}

func TestReadAll(t *testing.T) {
	dir, b := makeBundle(t, map[string]string{"a.md": "hello\n", "empty": ""})
	data, err := b.ReadAll(t.Context(), "a.md")
	if err != nil || string(data) != "hello\n" {
		t.Fatalf("ReadAll = %q, %v", data, err)
	}
	data, err = b.ReadAll(t.Context(), "empty")
	if err != nil || len(data) != 0 {
		t.Fatalf("ReadAll(empty) = %q, %v", data, err)
	}
	tamper(t, dir, "a.md", "HELLO\n")
	if _, err := b.ReadAll(t.Context(), "a.md"); !errors.Is(err, ErrContentMismatch) {
		t.Fatalf("ReadAll(damaged) error = %v, want ErrContentMismatch", err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if _, err := b.ReadAll(ctx, "empty"); !errors.Is(err, context.Canceled) {
		t.Fatalf("ReadAll(cancelled) error = %v, want context.Canceled", err)
	}
}

func TestVerify(t *testing.T) {
	dir, b := makeBundle(t, map[string]string{"a": "hello\n", "b/c": "hello\n", "d": "hello\n", "e": "hello\n", "f": ""})
	rep, err := b.Verify(t.Context())
	must(t, err)
	if want := (Report{Files: 5, Bytes: 24}); !reflect.DeepEqual(rep, want) || !rep.OK() {
		t.Fatalf("Verify = %+v, want %+v", rep, want)
	}

	tamper(t, dir, "a", "HELLO\n")  // same size, other bytes
	tamper(t, dir, "e", "hello!\n") // other size
	must(t, os.Remove(filepath.Join(dir, "b", "c")))
	rep, err = b.Verify(t.Context())
	want := Report{Files: 2, Bytes: 6, Missing: []string{"b/c"}, Mismatched: []string{"a", "e"}}
	if !reflect.DeepEqual(rep, want) || rep.OK() {
		t.Fatalf("Verify = %+v, want %+v", rep, want)
	}
	wantErr(t, err, ErrContentMismatch, fmt.Sprintf(`bundle %s: 3 of 5 files do not match the manifest: "b/c" missing, "a" damaged, "e" damaged`, dir))
	if !errors.Is(err, ErrMissingFile) {
		t.Fatalf("error %v does not wrap ErrMissingFile", err)
	}
	must(t, os.WriteFile(filepath.Join(dir, "b", "c"), []byte("hello\n"), 0o644))
	tamper(t, dir, "e", "hello\n")
	_, err = b.Verify(t.Context())
	if !errors.Is(err, ErrContentMismatch) || errors.Is(err, ErrMissingFile) {
		t.Fatalf("error = %v, want ErrContentMismatch only", err)
	}
}

func TestCheckSizes(t *testing.T) {
	dir, b := makeBundle(t, map[string]string{"a": "hello\n", "b": "hello\n", "c": "hello\n"})
	must(t, b.CheckSizes(t.Context(), nil))
	tamper(t, dir, "a", "HELLO\n") // same size: CheckSizes cannot tell
	tamper(t, dir, "b", "hi\n")
	must(t, b.CheckSizes(t.Context(), []string{"a", "c"}))
	err := b.CheckSizes(t.Context(), nil)
	wantErr(t, err, ErrContentMismatch, fmt.Sprintf(`bundle %s: file content does not match the manifest: "b" has 3 bytes, the manifest says 6`, dir))
	must(t, os.Remove(filepath.Join(dir, "c")))
	err = b.CheckSizes(t.Context(), []string{"c", "b"})
	wantErr(t, err, ErrMissingFile, fmt.Sprintf(`bundle %s: file listed in the manifest is missing: "c"`, dir))
	err = b.CheckSizes(t.Context(), []string{"x"})
	wantErr(t, err, ErrNotListed, fmt.Sprintf(`bundle %s: "x": not listed in the manifest`, dir))
}

func TestParseLocation(t *testing.T) {
	good := []struct {
		in    string
		want  Location
		canon string
	}{
		{"/srv/bundles/x", Location{Scheme: "file", Path: "/srv/bundles/x"}, "/srv/bundles/x"},
		{"/srv/bundles/x/", Location{Scheme: "file", Path: "/srv/bundles/x"}, "/srv/bundles/x"},
		{"file:///srv/bundles/x/", Location{Scheme: "file", Path: "/srv/bundles/x"}, "/srv/bundles/x"},
		{"file://localhost/srv/a%20b", Location{Scheme: "file", Path: "/srv/a b"}, "/srv/a b"},
		{"s3://reports/weather/2026/", Location{Scheme: "s3", Bucket: "reports", Prefix: "weather/2026/"}, "s3://reports/weather/2026/"},
		{"s3://reports/weather", Location{Scheme: "s3", Bucket: "reports", Prefix: "weather/"}, "s3://reports/weather/"},
		{"s3://reports", Location{Scheme: "s3", Bucket: "reports"}, "s3://reports/"},
		{"s3://reports/", Location{Scheme: "s3", Bucket: "reports"}, "s3://reports/"},
	}
	for _, tc := range good {
		got, err := ParseLocation(tc.in)
		if err != nil || got != tc.want || got.String() != tc.canon {
			t.Errorf("ParseLocation(%q) = %+v (%q), %v; want %+v (%q)", tc.in, got, got.String(), err, tc.want, tc.canon)
		}
		if again, err := ParseLocation(got.String()); err != nil || again != got {
			t.Errorf("canonical form %q does not parse back: %+v, %v", got.String(), again, err)
		}
	}
	const help = ": use an absolute path, file:///abs/path/ or s3://bucket/prefix/"
	bad := []struct{ in, want string }{
		{"", `bundle location "": empty` + help},
		{"bundles/x", `bundle location "bundles/x": relative path` + help},
		{"file://bundles/x", `bundle location "file://bundles/x": host "bundles": only local files are supported` + help},
		{"file:bundles/x", `bundle location "file:bundles/x": relative path` + help},
		{"http://h/x", `bundle location "http://h/x": unsupported scheme "http"` + help},
		{"s3:///prefix/", `bundle location "s3:///prefix/": no bucket` + help},
		{"s3://", `bundle location "s3://": no bucket` + help},
		{"s3://Bad_Bucket!/x", `bundle location "s3://Bad_Bucket!/x": "Bad_Bucket!" is not a valid bucket name` + help},
		{"s3://bk1/a/../x/", `bundle location "s3://bk1/a/../x/": prefix: invalid path "a/../x": has a ".." segment` + help},
		{"s3://bk1//x/", `bundle location "s3://bk1//x/": prefix: invalid path "/x": absolute; paths must be relative to the bundle or root` + help},
		{"/srv/../etc", `bundle location "/srv/../etc": has a ".." segment` + help},
		{"/srv/b\x1b]0;x\a/", `bundle location "/srv/b\x1b]0;x\a/": contains control characters` + help},
		{"s3://bk1/a\nb/", `bundle location "s3://bk1/a\nb/": contains control characters` + help},
	}
	for _, tc := range bad {
		_, err := ParseLocation(tc.in)
		if err == nil || err.Error() != tc.want {
			t.Errorf("ParseLocation(%q) error = %v\nwant %s", tc.in, err, tc.want)
		}
	}
}

// TestReadAllSizesItsBufferOnce: a reader that knows its size is read into
// one buffer of that size (plus the read that sees the end), not a
// doubling series; a wrong size still reads every byte.
func TestReadAllSizesItsBufferOnce(t *testing.T) {
	data := bytes.Repeat([]byte("0123456789"), 100_000)
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	got, err := readAll(bytes.NewReader(data), int64(len(data)))
	runtime.ReadMemStats(&after)
	if err != nil || len(got) != len(data) {
		t.Fatalf("readAll: %d bytes, %v", len(got), err)
	}
	// Doubling from 512 bytes allocates about twice the data.
	if n := after.TotalAlloc - before.TotalAlloc; n > uint64(len(data))+64<<10 {
		t.Errorf("readAll of a sized %d-byte reader allocated %d bytes, want one buffer of about its size", len(data), n)
	}
	for _, size := range []int64{0, 10, int64(len(data)) - 1, -1} {
		got, err := readAll(bytes.NewReader(data), size)
		if err != nil || !bytes.Equal(got, data) {
			t.Errorf("size hint %d: read %d bytes, %v; want all %d", size, len(got), err, len(data))
		}
	}
}

// TestCheckCreated: a created time up to max_clock_skew past the clock is
// accepted, a later one refused with one line naming the time and the
// limit; 0 checks nothing.
func TestCheckCreated(t *testing.T) {
	now := time.Date(2026, 6, 19, 12, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		created time.Time
		skew    time.Duration
		refused bool
	}{
		{now, 5 * time.Minute, false},
		{now.Add(-24 * time.Hour), 5 * time.Minute, false},
		{now.Add(5 * time.Minute), 5 * time.Minute, false},
		{now.Add(5*time.Minute + time.Millisecond), 5 * time.Minute, true},
		{time.Date(2099, 1, 1, 0, 0, 0, 0, time.UTC), 5 * time.Minute, true},
		{time.Date(2099, 1, 1, 0, 0, 0, 0, time.UTC), 0, false},
	} {
		err := CheckCreated(tc.created, now, tc.skew)
		if (err != nil) != tc.refused || err != nil && !errors.Is(err, ErrFutureCreated) {
			t.Errorf("CheckCreated(%s, skew %s) = %v, want refused %v", tc.created, tc.skew, err, tc.refused)
		}
	}
	err := CheckCreated(time.Date(2099, 1, 1, 0, 0, 0, 0, time.UTC), now, 5*time.Minute)
	wantErr(t, err, ErrFutureCreated, "bundle created in the future: created 2099-01-01T00:00:00Z is later than this host's clock "+
		"(2026-06-19T12:00:00Z) plus max_clock_skew (5m0s); fix the producer's clock and create the bundle again")
}

// TestOpenRefusesTheFuture: Open refuses a manifest created past the clock
// and the skew it is given, and reads it with no skew given.
func TestOpenRefusesTheFuture(t *testing.T) {
	dir := t.TempDir()
	writeTree(t, dir, map[string]string{"a.txt": "hello\n"})
	_, data, err := Create(t.Context(), dir, "w.t", time.Date(2099, 1, 1, 0, 0, 0, 0, time.UTC))
	must(t, err)
	store, err := local.New(dir)
	must(t, err)
	_, err = Open(t.Context(), store, "/srv/b", Digest(data), 5*time.Minute)
	if !errors.Is(err, ErrFutureCreated) || !strings.HasPrefix(err.Error(), "bundle /srv/b: bundle created in the future: created 2099-01-01T00:00:00Z") {
		t.Fatalf("Open = %v, want the bundle refused as created in the future", err)
	}
	if _, err := Open(t.Context(), store, "/srv/b", Digest(data), 0); err != nil {
		t.Fatalf("Open without a skew: %v", err)
	}
	// Within the skew: accepted.
	_, data, err = Create(t.Context(), dir, "w.t", time.Now().Add(time.Minute))
	must(t, err)
	if _, err := Open(t.Context(), store, "/srv/b", Digest(data), 5*time.Minute); err != nil {
		t.Fatalf("Open of a bundle a minute ahead: %v", err)
	}
}

// An id of exactly MaxIDBytes, spaces included, is a valid id.
func TestManifestIDAtTheLimit(t *testing.T) {
	id := "w t " + strings.Repeat("x", MaxIDBytes-4)
	m, err := ParseManifest([]byte(`{"schema_version":1,"id":"` + id + `","created":"2026-06-19T12:00:00Z","files":[]}`))
	if err != nil || m.ID != id {
		t.Fatalf("ParseManifest = %q, %v; want the id of %d bytes", m.ID, err, MaxIDBytes)
	}
}
