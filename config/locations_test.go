package config

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// AllowsBundle compares whole path segments after cleaning, resolves local
// paths with real (both the bundle and the entries), and compares S3
// bundles by bucket and key prefix.
func TestAllowsBundle(t *testing.T) {
	t.Parallel()
	p := Pipeline{ID: "weather.daily", BundleLocations: []string{"/srv/bundles/weather", "/srv/shared/", "s3://bundles/weather/", "file:///mnt/incoming"}}
	// The fake disk: /srv/bundles/weather/link -> /srv/secret, and
	// /srv/alias -> /srv/bundles/weather.
	real := func(p string) string {
		for link, target := range map[string]string{"/srv/bundles/weather/link": "/srv/secret", "/srv/alias": "/srv/bundles/weather"} {
			if p == link || strings.HasPrefix(p, link+"/") {
				return target + strings.TrimPrefix(p, link)
			}
		}
		return p
	}
	for _, tc := range []struct {
		loc  string
		ok   bool
		why  string // in the refusal
		real bool   // with the fake disk
	}{
		{loc: "/srv/bundles/weather/2026-06-19", ok: true},
		{loc: "/srv/bundles/weather/2026-06-19/", ok: true},
		{loc: "/srv/bundles/weather", ok: true},
		{loc: "/srv/bundles//weather/./b1", ok: true},
		{loc: "/srv/shared/x/y", ok: true},
		{loc: "file:///srv/bundles/weather/b1/", ok: true},
		{loc: "file://localhost/srv/bundles/weather/b1/", ok: true},
		{loc: "/mnt/incoming/b1", ok: true},
		{loc: "s3://bundles/weather/2026-06-19/", ok: true},
		{loc: "s3://bundles/weather/", ok: true},
		{loc: "s3://bundles/weather", ok: true},
		{loc: "/srv/alias/b1", ok: true, real: true},
		{loc: "/srv/bundles/weather-old/b1", why: "lies outside them"},
		{loc: "/srv/bundles", why: "lies outside them"},
		{loc: "/srv/tides/b1", why: "lies outside them"},
		{loc: "/srv/bundles/weather/../tides/b1", why: "is /srv/bundles/tides/b1, outside them"},
		{loc: "/srv/bundles/weather/b1/../../../secret", why: "is /srv/secret, outside them"},
		{loc: "file:///srv/bundles/weather/../tides/", why: "is /srv/bundles/tides, outside them"},
		{loc: "/srv/bundles/weather/link/b1", why: "is /srv/secret/b1, outside them", real: true},
		{loc: "/srv/bundles/weather/link/b1", ok: true}, // no disk: the spelling decides
		{loc: "s3://other/weather/b1/", why: "lies outside them"},
		{loc: "s3://bundles/weather-old/b1/", why: "lies outside them"},
		{loc: "s3://bundles/tides/", why: "lies outside them"},
		{loc: "s3://bundles/weather/../tides/b1/", why: "is s3://bundles/tides/b1/, outside them"},
		{loc: "s3://bundles/", why: "lies outside them"},
		{loc: "relative/b1", why: "is a relative path"},
		{loc: "", why: "is empty"},
		{loc: "ftp://host/b1", why: `has the unsupported scheme "ftp"`},
		{loc: "file://host/srv/bundles/weather/b1", why: `names the host "host": only local files are supported`},
		{loc: "s3:///weather/", why: "names no bucket"},
	} {
		var r func(string) string
		if tc.real {
			r = real
		}
		err := p.AllowsBundle(tc.loc, r)
		if tc.ok {
			if err != nil {
				t.Errorf("AllowsBundle(%q) = %v, want allowed", tc.loc, err)
			}
			continue
		}
		want := "bundle location not allowed: bundle " + tc.loc + ` of pipeline "weather.daily" ` + tc.why +
			" (bundle_locations: /srv/bundles/weather, /srv/shared/, s3://bundles/weather/, file:///mnt/incoming): publish it from one of them, or add a folder or s3:// prefix that holds it to the bundle_locations of pipeline \"weather.daily\" in the configuration"
		if err == nil || err.Error() != want || !errors.Is(err, ErrBundleNotAllowed) || errors.Is(err, ErrInvalid) {
			t.Errorf("AllowsBundle(%q) =\n %v\nwant\n %s", tc.loc, err, want)
		}
	}

	// Without bundle_locations any location passes.
	for _, loc := range []string{"/anywhere", "s3://any/where/", "relative"} {
		if err := (Pipeline{ID: "p"}).AllowsBundle(loc, real); err != nil {
			t.Errorf("no bundle_locations: AllowsBundle(%q) = %v", loc, err)
		}
	}
	// "/" and a whole bucket hold everything of theirs.
	wide := Pipeline{ID: "p", BundleLocations: []string{"/", "s3://bundles"}}
	for _, loc := range []string{"/srv/x", "/", "s3://bundles/a/b/"} {
		if err := wide.AllowsBundle(loc, nil); err != nil {
			t.Errorf("wide: AllowsBundle(%q) = %v", loc, err)
		}
	}
	if err := wide.AllowsBundle("s3://bundles2/a/", nil); !errors.Is(err, ErrBundleNotAllowed) {
		t.Errorf("wide: another bucket: %v", err)
	}
}

// On a real disk, ResolvePath resolves a symlink in the bundle, in the
// entry, and a bundle folder not created yet as far as it exists.
func TestAllowsBundleOnDisk(t *testing.T) {
	t.Parallel()
	tmp, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range []string{"allowed/b1", "secret"} {
		if err := os.MkdirAll(filepath.Join(tmp, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for link, target := range map[string]string{"allowed/out": "secret", "alias": "allowed"} {
		if err := os.Symlink(filepath.Join(tmp, target), filepath.Join(tmp, link)); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct {
		entry, loc string
		ok         bool
	}{
		{"allowed", "allowed/b1", true},
		{"allowed", "allowed/not-yet/b2", true},
		{"allowed", "alias/b1", true},
		{"alias", "allowed/b1", true},
		{"allowed", "allowed/out", false},
		{"allowed", "allowed/out/not-yet/b3", false},
		{"allowed", "secret", false},
	} {
		p := Pipeline{ID: "p", BundleLocations: []string{filepath.Join(tmp, tc.entry)}}
		err := p.AllowsBundle(filepath.Join(tmp, tc.loc), ResolvePath)
		if tc.ok != (err == nil) || (err != nil && !errors.Is(err, ErrBundleNotAllowed)) {
			t.Errorf("entry %s, bundle %s: %v, want allowed=%v", tc.entry, tc.loc, err, tc.ok)
		}
	}
}

// AllowsOpenedBundle checks the folder that was opened: the folder a
// location names inside an entry (through a link inside it too) passes;
// another folder, such as the one a re-pointed link named when it was
// opened, is refused in one line; so is a location whose link now leads
// out of the entry. S3 locations and pipelines without bundle_locations
// pass.
func TestAllowsOpenedBundle(t *testing.T) {
	t.Parallel()
	tmp, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range []string{"allowed/b1", "allowed/b2", "secret"} {
		if err := os.MkdirAll(filepath.Join(tmp, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for link, target := range map[string]string{"allowed/in": "allowed/b1", "allowed/out": "secret"} {
		if err := os.Symlink(filepath.Join(tmp, target), filepath.Join(tmp, link)); err != nil {
			t.Fatal(err)
		}
	}
	stat := func(d string) fs.FileInfo {
		fi, err := os.Stat(filepath.Join(tmp, d))
		if err != nil {
			t.Fatal(err)
		}
		return fi
	}
	p := Pipeline{ID: "p", BundleLocations: []string{filepath.Join(tmp, "allowed")}}
	const fix = `: publish it from one of them, or add a folder or s3:// prefix that holds it to the bundle_locations of pipeline "p" in the configuration`
	for _, tc := range []struct {
		loc, opened, why string // why "": allowed
	}{
		{"allowed/b1", "allowed/b1", ""},
		{"allowed/in", "allowed/b1", ""},
		{"allowed/b1", "secret", "changed while it was opened: the folder opened is not the one inside them that it names (a link re-pointed?)"},
		{"allowed/in", "secret", "changed while it was opened: the folder opened is not the one inside them that it names (a link re-pointed?)"},
		{"allowed/b1", "allowed/b2", "changed while it was opened: the folder opened is not the one inside them that it names (a link re-pointed?)"},
		{"allowed/out", "secret", "is " + filepath.Join(tmp, "secret") + ", outside them"},
	} {
		loc := filepath.Join(tmp, tc.loc)
		err := p.AllowsOpenedBundle(loc, stat(tc.opened))
		want := ""
		if tc.why != "" {
			want = fmt.Sprintf("bundle location not allowed: bundle %s of pipeline \"p\" %s (bundle_locations: %s)%s", loc, tc.why, filepath.Join(tmp, "allowed"), fix)
		}
		if got := fmt.Sprint(err); (err == nil) != (want == "") || (err != nil && (got != want || !errors.Is(err, ErrBundleNotAllowed))) {
			t.Errorf("%s opened as %s:\n got %v\nwant %s", tc.loc, tc.opened, err, want)
		}
	}
	if err := (Pipeline{ID: "p"}).AllowsOpenedBundle(filepath.Join(tmp, "secret"), stat("allowed/b1")); err != nil {
		t.Errorf("a pipeline without bundle_locations: %v", err)
	}
	s3 := Pipeline{ID: "p", BundleLocations: []string{"s3://bk1/in/"}}
	if err := s3.AllowsOpenedBundle("s3://bk1/in/b1/", stat("allowed/b1")); err != nil {
		t.Errorf("an S3 location: %v", err)
	}
}

func TestBundleLocationsValidation(t *testing.T) {
	t.Parallel()
	const help = `: give an absolute folder such as "/srv/bundles/weather" or "s3://bucket/prefix/"`
	base := "pipelines:\n  - id: p\n    destinations: [a]\n    bundle_locations:\n      - /srv/ok\n      - "
	dest := "\ndestinations:\n  - id: a\n    backend: local\n    path: /srv/a\n"
	for _, tc := range []struct{ entry, want string }{
		{`""`, `"" is empty` + help},
		{"srv/bundles", `"srv/bundles" is a relative path` + help},
		{"/srv/../etc", `"/srv/../etc" has a ".." segment: write the folder it means` + help},
		{"/srv/./b", `"/srv/./b" has a "." segment: write the folder it means` + help},
		{"file:///srv/../b", `"file:///srv/../b" has a ".." segment: write the folder it means` + help},
		{"file://host/srv", `"file://host/srv" names the host "host": only local files are supported` + help},
		{"ftp://host/b/", `"ftp://host/b/" has the unsupported scheme "ftp"` + help},
		{"s3:///b/", `"s3:///b/" names no bucket` + help},
		{"s3://Bad_Bucket/x/", `"s3://Bad_Bucket/x/" names "Bad_Bucket", which is not a valid bucket name` + help},
		{"s3://bucket/a/../b/", `"s3://bucket/a/../b/" has a key prefix that is not clean (invalid path "a/../b": has a ".." segment)` + help},
		{"s3://bucket/a//b/", `"s3://bucket/a//b/" has a key prefix that is not clean (invalid path "a//b": has an empty segment)` + help},
	} {
		_, err := Parse([]byte(base+tc.entry+dest), "config.yaml")
		want := "config.yaml:6: pipelines[0] (p): bundle_locations entry " + tc.want
		if err == nil || err.Error() != want || !errors.Is(err, ErrInvalid) {
			t.Errorf("%s:\n got %v\nwant %s", tc.entry, err, want)
		}
	}
	for _, entry := range []string{"/srv/bundles", "/srv/bundles/", "file:///srv/bundles/", "s3://bundles", "s3://bundles/", "s3://bundles/weather/daily/", "/"} {
		if _, err := Parse([]byte(base+entry+dest), "config.yaml"); err != nil {
			t.Errorf("%s: %v", entry, err)
		}
	}
}

// Warnings name the pipelines without bundle_locations, but only beside
// other pipelines.
func TestWarnings(t *testing.T) {
	t.Parallel()
	cfg := func(pipes ...Pipeline) *Config { return &Config{Pipelines: pipes} }
	with := func(id string) Pipeline { return Pipeline{ID: id, BundleLocations: []string{"/srv/" + id}} }
	for _, c := range []*Config{cfg(), cfg(Pipeline{ID: "a"}), cfg(with("a"), with("b"))} {
		if w := c.Warnings(); len(w) != 0 {
			t.Errorf("%+v: warnings %q, want none", c.Pipelines, w)
		}
	}
	w := cfg(Pipeline{ID: "a"}, with("b"), Pipeline{ID: "c"}).Warnings()
	want := "2 of 3 pipelines declare no bundle_locations (a, c): they accept a bundle from any location, so a producer can have another pipeline's bundles published under theirs; list each pipeline's bundle folders or s3:// prefixes under bundle_locations"
	if len(w) != 1 || w[0] != want {
		t.Errorf("warnings %q, want %q", w, want)
	}
}
