package engine

// Fingerprints: detecting bytes the catalog does not describe
//
// A holder that lost its lease while one of its writes was in flight (a
// process paused past its lease, a hung request) can still land that write
// after a newer holder committed. Conditional writes stop most of them (a
// new path is written only if still absent, a replaced one only if it is
// still the version the plan saw), but not all: on a local disk the check
// and the rename are two steps, and a path the newer holder left unchanged
// still matches the stale writer's condition. Such bytes differ from their
// catalog record while size and name look right.
//
// The fingerprint file (.distributor/fingerprints) is how the next holder
// notices without rehashing the root, like git's index: for each path it
// records the fingerprint of the stored version (local: inode, size, mtime;
// S3: ETag) together with the sha256 of the bytes that version holds, as
// known to the holder that wrote or hashed it. Any replacement of the object
// changes its fingerprint. Before planning, every output the plan would
// leave in place is checked: its listed fingerprint and the catalog's
// sha256 must match an entry; otherwise its bytes are hashed once (or its
// recorded sha256 metadata read, on S3), and bytes that differ from the
// catalog are rewritten by this publication instead of called unchanged.
//
// Entries are facts about versions, not about the catalog, so the file
// needs no compare-and-swap: an entry is trusted only when the version it
// names is still the stored one. A missing or unreadable file costs one
// hash per output the next publication keeps, nothing else.

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"sort"
	"strings"

	"golang.org/x/sync/errgroup"

	"github.com/distributor/distributor/catalog"
	"github.com/distributor/distributor/planner"
	"github.com/distributor/distributor/storage"
)

// FingerprintsPath holds the fingerprints of stored versions whose content
// a holder knew.
const FingerprintsPath = ".distributor/fingerprints"

const fingerprintsHeader = "distributor-fingerprints 1"

// known is what a holder knew of one stored version.
type known struct {
	fingerprint string
	sha256      string
}

// fingerprints maps output paths to their last known version.
type fingerprints map[string]known

// readFingerprints reads the root's fingerprint file; a missing or
// unreadable one is empty (it only costs hashing).
func (e *Engine) readFingerprints(ctx context.Context, root storage.Backend) (fingerprints, error) {
	data, _, err := root.ReadVersion(ctx, FingerprintsPath)
	if err != nil {
		if errors.Is(err, storage.ErrUnavailable) || ctx.Err() != nil {
			return nil, err
		}
		e.Log.Debug().Err(err).Str("root", root.String()).Msg("fingerprint file unreadable; kept outputs are hashed once")
		return fingerprints{}, nil
	}
	return parseFingerprints(data), nil
}

// parseFingerprints reads "sha256 TAB fingerprint TAB path" lines after the
// header. Paths cannot hold tabs or newlines (catalog path rules).
func parseFingerprints(data []byte) fingerprints {
	out := fingerprints{}
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	if !sc.Scan() || sc.Text() != fingerprintsHeader {
		return out
	}
	for sc.Scan() {
		sha, rest, ok1 := strings.Cut(sc.Text(), "\t")
		fp, path, ok2 := strings.Cut(rest, "\t")
		if ok1 && ok2 && sha != "" && fp != "" && path != "" {
			out[path] = known{fingerprint: fp, sha256: sha}
		}
	}
	if sc.Err() != nil {
		return fingerprints{}
	}
	return out
}

func (f fingerprints) encode() []byte {
	paths := make([]string, 0, len(f))
	for p := range f {
		paths = append(paths, p)
	}
	sort.Strings(paths)
	var buf bytes.Buffer
	buf.WriteString(fingerprintsHeader + "\n")
	for _, p := range paths {
		k := f[p]
		buf.WriteString(k.sha256 + "\t" + k.fingerprint + "\t" + p + "\n")
	}
	return buf.Bytes()
}

// vouches reports whether the entry for path names the stored version and
// says it holds sha.
func (f fingerprints) vouches(path string, stored planner.Stored, sha string) bool {
	k, ok := f[path]
	return ok && k.fingerprint == stored.Fingerprint && k.sha256 == sha
}

// checkKept finds the outputs a plan would keep in place whose bytes are
// not vouched for, checks them, and marks the ones that differ from their
// catalog record as damaged in stored (so the planner rewrites them). The
// ones that match are added to fps. It reports whether fps changed.
func (e *Engine) checkKept(ctx context.Context, root storage.Backend, cat *catalog.Catalog, desired []Output, stored map[string]planner.Stored, fps fingerprints) (bool, error) {
	if cat == nil {
		return false, nil
	}
	find := cat.Finder()
	var suspects []catalog.Output
	for _, d := range desired {
		rec, managed := find(d.Path)
		s, exists := stored[d.Path]
		if !managed || !exists || s.Size != rec.Size || rec.SHA256 != d.SHA256 || s.Fingerprint == "" {
			continue // rewritten anyway, or nothing to tell versions apart
		}
		if !fps.vouches(d.Path, s, rec.SHA256) {
			suspects = append(suspects, rec)
		}
	}
	if len(suspects) == 0 {
		return false, nil
	}
	matches := make([]bool, len(suspects))
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(e.workers())
	for i, rec := range suspects {
		g.Go(func() error {
			ok, err := landed(gctx, root, rec)
			matches[i] = ok
			return err
		})
	}
	if err := g.Wait(); err != nil {
		return false, err
	}
	damaged := 0
	for i, rec := range suspects {
		s := stored[rec.Path]
		if matches[i] {
			fps[rec.Path] = known{fingerprint: s.Fingerprint, sha256: rec.SHA256}
			continue
		}
		s.Damaged = true
		stored[rec.Path] = s
		damaged++
	}
	if damaged > 0 {
		e.Log.Warn().Str("root", root.String()).Int("outputs", damaged).
			Msg("stored bytes differ from the catalog (a stale writer or a hand edit); this publication rewrites them")
	}
	return len(suspects) > damaged, nil
}

// keepFingerprints drops entries of paths the catalog no longer manages.
func (f fingerprints) keepOnly(cat *catalog.Catalog) {
	if cat == nil {
		return
	}
	find := cat.Finder()
	for p := range f {
		if _, ok := find(p); !ok {
			delete(f, p)
		}
	}
}
