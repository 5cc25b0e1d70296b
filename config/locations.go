package config

import (
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"strings"

	"github.com/distributor/distributor/catalog"
)

// ErrBundleNotAllowed: a bundle lies outside its pipeline's
// bundle_locations. It is the configuration's refusal of one bundle, not
// an invalid configuration: it does not match ErrInvalid.
var ErrBundleNotAllowed = errors.New("bundle location not allowed")

// place is a bundle location, or a bundle_locations entry, reduced to what
// containment compares: a local folder or an S3 bucket and key prefix.
type place struct {
	bucket string // "" for a local folder

	// path is, for a local folder, the absolute clean path; for S3, the
	// key prefix cleaned, without a leading or trailing "/" ("" = the
	// whole bucket).
	path string
}

func (p place) String() string {
	if p.bucket != "" {
		if p.path == "" {
			return "s3://" + p.bucket + "/"
		}
		return "s3://" + p.bucket + "/" + p.path + "/"
	}
	return p.path
}

// contains reports whether q lies in p, compared on whole path segments:
// /srv/bundles holds /srv/bundles/b1, not /srv/bundles-old.
func (p place) contains(q place) bool {
	if p.bucket != q.bucket {
		return false
	}
	if p.bucket != "" {
		return p.path == "" || q.path == p.path || strings.HasPrefix(q.path, p.path+"/")
	}
	if q.path == p.path {
		return true
	}
	dir := p.path
	if !strings.HasSuffix(dir, string(filepath.Separator)) { // "/" holds everything local
		dir += string(filepath.Separator)
	}
	return strings.HasPrefix(q.path, dir)
}

// parsePlace reads an absolute local path, file:///abs/path/ or
// s3://bucket/prefix/ and cleans it: "." and ".." are resolved lexically
// and repeated slashes folded, so that no spelling of a location escapes
// the comparison. (Locations with such segments are refused later, when
// the bundle is opened; the comparison must hold whatever they mean.)
// The message says why loc is none of them.
func parsePlace(loc string) (place, string) {
	switch {
	case loc == "":
		return place{}, "is empty"
	case strings.HasPrefix(loc, "s3://"):
		bucket, key, _ := strings.Cut(strings.TrimPrefix(loc, "s3://"), "/")
		if bucket == "" {
			return place{}, "names no bucket"
		}
		key = strings.Trim(path.Clean("/"+key), "/")
		return place{bucket: bucket, path: key}, ""
	case strings.HasPrefix(loc, "file:"):
		u, err := url.Parse(loc)
		if err != nil {
			return place{}, "is not a valid file URL: " + err.Error()
		}
		if u.Host != "" && u.Host != "localhost" {
			return place{}, fmt.Sprintf("names the host %q: only local files are supported", u.Host)
		}
		if u.RawQuery != "" || u.Fragment != "" {
			return place{}, "has a query or fragment"
		}
		loc = u.Path
	case strings.Contains(loc, "://"):
		scheme, _, _ := strings.Cut(loc, "://")
		return place{}, fmt.Sprintf("has the unsupported scheme %q", scheme)
	}
	if !filepath.IsAbs(loc) {
		return place{}, "is a relative path"
	}
	return place{path: filepath.Clean(loc)}, ""
}

// AllowsBundle returns nil when p accepts a bundle at location: p declares
// no bundle_locations (any location), or location
// lies inside one of them, compared on whole path segments after cleaning
// (S3: the same bucket and a key prefix). real, when not nil, maps a
// cleaned absolute local path to the folder it names on disk (symlinks
// resolved, see ResolvePath); it is applied to the bundle and to every
// local entry, so that neither a symlink nor ".." leads out of them.
// Otherwise the error wraps ErrBundleNotAllowed and is one line naming the
// bundle, the pipeline, its bundle_locations and the fix.
func (p Pipeline) AllowsBundle(location string, real func(string) string) error {
	if len(p.BundleLocations) == 0 {
		return nil
	}
	if real == nil {
		real = func(s string) string { return s }
	}
	b, msg := parsePlace(location)
	if msg != "" {
		return p.notAllowed(location, msg)
	}
	if b.bucket == "" {
		b.path = real(b.path)
	}
	for _, entry := range p.BundleLocations {
		e, msg := parsePlace(entry)
		if msg != "" || (e.bucket == "") != (b.bucket == "") {
			continue // Validate refuses bad entries; S3 never holds a local path
		}
		if e.bucket == "" {
			e.path = real(e.path)
		}
		if e.contains(b) {
			return nil
		}
	}
	why := "lies outside them"
	if strings.TrimSuffix(b.String(), "/") != strings.TrimSuffix(location, "/") {
		why = fmt.Sprintf("is %s, outside them", b)
	}
	return p.notAllowed(location, why)
}

// AllowsOpenedBundle returns nil when the local folder opened for the
// bundle at location (opened: its identity, as a stat of the open handle
// gives it) is a folder inside one of p's bundle_locations: the folder
// that location names now is reached from the entry's folder without
// leaving it (os.Root), and must be the very folder that was opened.
// AllowsBundle checks a path before it is opened; this checks what was
// opened, so that a link re-pointed between the two (to another
// pipeline's bundle) is refused. p without bundle_locations and S3
// locations pass. Otherwise the error wraps ErrBundleNotAllowed.
func (p Pipeline) AllowsOpenedBundle(location string, opened fs.FileInfo) error {
	if len(p.BundleLocations) == 0 {
		return nil
	}
	b, msg := parsePlace(location)
	if msg != "" {
		return p.notAllowed(location, msg)
	}
	if b.bucket != "" {
		return nil
	}
	b.path = ResolvePath(b.path)
	inside := false
	for _, entry := range p.BundleLocations {
		e, msg := parsePlace(entry)
		if msg != "" || e.bucket != "" {
			continue
		}
		e.path = ResolvePath(e.path)
		if !e.contains(b) {
			continue
		}
		inside = true
		rel, err := filepath.Rel(e.path, b.path)
		if err == nil && sameFolderBeneath(e.path, rel, opened) {
			return nil
		}
	}
	if !inside {
		return p.notAllowed(location, fmt.Sprintf("is %s, outside them", b))
	}
	return p.notAllowed(location, "changed while it was opened: the folder opened is not the one inside them that it names (a link re-pointed?)")
}

// sameFolderBeneath reports whether rel, below the folder dir and reached
// without leaving it, is the folder opened.
func sameFolderBeneath(dir, rel string, opened fs.FileInfo) bool {
	r, err := os.OpenRoot(dir)
	if err != nil {
		return false
	}
	defer r.Close()
	fi, err := r.Stat(rel)
	return err == nil && fi.IsDir() && os.SameFile(fi, opened)
}

func (p Pipeline) notAllowed(location, why string) error {
	return fmt.Errorf("%w: bundle %s of pipeline %q %s (bundle_locations: %s): publish it from one of them, or add a folder or s3:// prefix that holds it to the bundle_locations of pipeline %q in the configuration",
		ErrBundleNotAllowed, location, p.ID, why, strings.Join(p.BundleLocations, ", "), p.ID)
}

// bucketName is a lenient S3 bucket name (S3-compatible servers accept
// more than AWS does), as bundle locations accept it.
var bucketName = regexp.MustCompile(`^[a-z0-9][a-z0-9._-]{1,61}[a-z0-9]$`)

// checkBundleLocation: an entry of bundle_locations is an absolute local
// folder, file:///abs/path/ or s3://bucket/prefix/, written without "."
// or ".." segments (so that it means what it says).
func checkBundleLocation(loc string) string {
	const help = `: give an absolute folder such as "/srv/bundles/weather" or "s3://bucket/prefix/"`
	pl, msg := parsePlace(loc)
	if msg != "" {
		return msg + help
	}
	if pl.bucket != "" {
		bucket, key, _ := strings.Cut(strings.TrimPrefix(loc, "s3://"), "/")
		if !bucketName.MatchString(bucket) {
			return fmt.Sprintf("names %q, which is not a valid bucket name%s", bucket, help)
		}
		if key = strings.TrimSuffix(key, "/"); key != "" {
			if err := catalog.ValidatePath(key); err != nil {
				return fmt.Sprintf("has a key prefix that is not clean (%v)%s", err, help)
			}
		}
		return ""
	}
	if strings.HasPrefix(loc, "file:") {
		u, _ := url.Parse(loc) // parsePlace parsed it
		loc = u.Path
	}
	for seg := range strings.SplitSeq(filepath.ToSlash(loc), "/") {
		if seg == "." || seg == ".." {
			return fmt.Sprintf("has a %q segment: write the folder it means%s", seg, help)
		}
	}
	return ""
}

// Warnings are what a valid configuration probably gets wrong, one line
// each: pipelines that accept bundles from anywhere (no bundle_locations)
// beside others, whose producers could then announce each other's folders.
func (c *Config) Warnings() []string {
	if len(c.Pipelines) < 2 {
		return nil
	}
	var open []string
	for _, p := range c.Pipelines {
		if len(p.BundleLocations) == 0 {
			open = append(open, p.ID)
		}
	}
	if len(open) == 0 {
		return nil
	}
	return []string{fmt.Sprintf("%d of %d pipelines declare no bundle_locations (%s): they accept a bundle from any location, so a producer can have another pipeline's bundles published under theirs; list each pipeline's bundle folders or s3:// prefixes under bundle_locations",
		len(open), len(c.Pipelines), strings.Join(open, ", "))}
}
