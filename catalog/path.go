package catalog

import (
	"errors"
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"
)

// FileName is the catalog's name inside a destination root.
const FileName = ".distributor.json"

// ReservedDir is the folder under a root that distributor keeps for its own
// bookkeeping (locks, intents). Nothing may be published into it.
const ReservedDir = ".distributor"

// MaxPathLen is the longest relative path accepted anywhere (bytes).
const MaxPathLen = 1024

// ErrBadPath is wrapped by every path validation error.
var ErrBadPath = errors.New("invalid path")

// ValidatePath checks the path rules shared by manifests, mapped outputs and
// catalog records: relative, '/'-separated, no empty, '.' or '..' segment, no
// backslash, no NUL or control character, valid UTF-8, at most 1024 bytes.
func ValidatePath(p string) error {
	bad := func(why string) error { return fmt.Errorf("%w %q: %s", ErrBadPath, p, why) }
	switch {
	case p == "":
		return bad("empty")
	case len(p) > MaxPathLen:
		return bad(fmt.Sprintf("longer than %d bytes", MaxPathLen))
	case !utf8.ValidString(p):
		return bad("not valid UTF-8")
	case strings.HasPrefix(p, "/"):
		return bad("absolute; paths must be relative to the bundle or root")
	case strings.Contains(p, `\`):
		return bad(`contains '\'; use '/' as the separator`)
	}
	for _, r := range p {
		if unicode.IsControl(r) { // C0, DEL and C1
			return bad("contains a NUL or control character")
		}
	}
	for rest := p; ; {
		seg, more, found := strings.Cut(rest, "/")
		switch seg {
		case "":
			return bad("has an empty segment")
		case ".", "..":
			return bad(fmt.Sprintf("has a %q segment", seg))
		}
		if !found {
			return nil
		}
		rest = more
	}
}

// IsReserved reports whether p is the catalog file, the reserved folder, or
// lies under either, or is named like a backend's temp file (TempPrefix);
// such paths can never be outputs. The comparison ignores case: on a
// case-insensitive file system ".Distributor.json" is the catalog.
func IsReserved(p string) bool {
	first, _, _ := strings.Cut(p, "/")
	if strings.EqualFold(first, FileName) || strings.EqualFold(first, ReservedDir) {
		return true
	}
	return IsTempName(p[strings.LastIndexByte(p, '/')+1:])
}

// TempPrefix starts the name of a file a backend is still writing; it sits
// beside its target until renamed over it (one folder, one cheap rename).
const TempPrefix = ".distributor-tmp-"

// IsTempName reports whether a base name is a backend's temp file name.
func IsTempName(name string) bool {
	return len(name) >= len(TempPrefix) && strings.EqualFold(name[:len(TempPrefix)], TempPrefix)
}

// ValidateOutputPath is ValidatePath plus the reserved-name rule.
func ValidateOutputPath(p string) error {
	if err := ValidatePath(p); err != nil {
		return err
	}
	if IsReserved(p) {
		return fmt.Errorf("%w %q: reserved for distributor's own state (%s, %s/)", ErrBadPath, p, FileName, ReservedDir)
	}
	return nil
}
