package bundle

import (
	"fmt"
	"net/url"
	"path/filepath"
	"regexp"
	"strings"

	"github.com/distributor/distributor/catalog"
)

// Location is a parsed bundle location.
type Location struct {
	Scheme string // "file" or "s3"
	Path   string // file: the absolute, cleaned local path
	Bucket string // s3
	Prefix string // s3: key prefix, "" or ending in '/'
}

// Lenient S3 bucket rule (S3-compatible servers accept '_' too).
var bucketRE = regexp.MustCompile(`^[a-z0-9][a-z0-9._-]{1,61}[a-z0-9]$`)

const locationHelp = "use an absolute path, file:///abs/path/ or s3://bucket/prefix/"

// ParseLocation accepts an absolute local path, file:///abs/path/ or
// s3://bucket/prefix/. Relative paths, other schemes, an s3 URL without a
// bucket, any "." or ".." segment and control characters are refused.
func ParseLocation(loc string) (Location, error) {
	bad := func(why string) error {
		return fmt.Errorf("%w %q: %s: %s", ErrBadLocation, loc, why, locationHelp)
	}
	switch {
	case loc == "":
		return Location{}, bad("empty")
	case hasControl(loc):
		return Location{}, bad("contains control characters")
	case strings.HasPrefix(loc, "s3://"):
		rest := strings.TrimPrefix(loc, "s3://")
		bucket, prefix, _ := strings.Cut(rest, "/")
		if bucket == "" {
			return Location{}, bad("no bucket")
		}
		if !bucketRE.MatchString(bucket) {
			return Location{}, bad(fmt.Sprintf("%q is not a valid bucket name", bucket))
		}
		if prefix != "" {
			if err := catalog.ValidatePath(strings.TrimSuffix(prefix, "/")); err != nil {
				return Location{}, bad(fmt.Sprintf("prefix: %v", err))
			}
			prefix = strings.TrimSuffix(prefix, "/") + "/"
		}
		return Location{Scheme: "s3", Bucket: bucket, Prefix: prefix}, nil
	case strings.HasPrefix(loc, "file:"):
		u, err := url.Parse(loc)
		if err != nil {
			return Location{}, bad(err.Error())
		}
		if u.Host != "" && u.Host != "localhost" {
			return Location{}, bad(fmt.Sprintf("host %q: only local files are supported", u.Host))
		}
		if u.RawQuery != "" || u.Fragment != "" {
			return Location{}, bad("a query or fragment is not allowed")
		}
		return localLocation(u.Path, bad)
	case strings.Contains(loc, "://"):
		scheme, _, _ := strings.Cut(loc, "://")
		return Location{}, bad(fmt.Sprintf("unsupported scheme %q", scheme))
	}
	return localLocation(loc, bad)
}

func localLocation(p string, bad func(string) error) (Location, error) {
	if !filepath.IsAbs(p) {
		return Location{}, bad("relative path")
	}
	for seg := range strings.SplitSeq(filepath.ToSlash(p), "/") {
		if seg == "." || seg == ".." {
			return Location{}, bad(fmt.Sprintf("has a %q segment", seg))
		}
	}
	return Location{Scheme: "file", Path: filepath.Clean(p)}, nil
}

// String is the canonical form: the absolute path for local bundles,
// s3://bucket/prefix/ for S3.
func (l Location) String() string {
	if l.Scheme == "s3" {
		return "s3://" + l.Bucket + "/" + l.Prefix
	}
	return l.Path
}
