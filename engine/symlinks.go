package engine

import (
	"context"
	"errors"
	"fmt"
	"path"
	"slices"
	"strings"

	"github.com/distributor/distributor/planner"
	"github.com/distributor/distributor/storage"
)

// A symbolic link planted in a root (a managed folder replaced by a link
// to elsewhere, say) is never followed: the backend refuses every path at
// or below it (storage.ErrSymlink). A publication that would write or
// delete there is refused when planned, before its intent, so it neither
// half-applies nor leaves an intent that no run can roll forward; verify
// reports the outputs below a link as damaged and reconcile-state drops
// their records, which is the repair once the link is removed (or kept as
// content distributor does not manage).

// refuseSymlinks returns an error wrapping storage.ErrSymlink when a path
// p plans to write, or a folder on the way to a path it deletes, is a
// symbolic link (deleting a link itself removes only the link). Links in
// the way of paths the root does not manage are left to the collisions.
// links are the links Find reported. A delete of a path Find did not
// report (its bytes are gone, or Find looked the written paths up and
// never came near it) is looked up, one Stat per folder, on a root that
// can hold links. Without links or such deletes it does no I/O.
func refuseSymlinks(ctx context.Context, root storage.Backend, p planner.Plan, reached func(string) bool, links []string) error {
	var through, found []string
	seen := map[string]bool{}
	add := func(p, link string) {
		through, seen[p] = append(through, p), true
		if !slices.Contains(found, link) {
			found = append(found, link)
		}
	}
	if len(links) > 0 {
		set := make(map[string]bool, len(links))
		for _, l := range links {
			set[l] = true
		}
		for _, it := range p.Items {
			// A link in the way of a path the root does not manage is a
			// collision, refused as such.
			if it.Action == planner.Collision {
				continue
			}
			if l := linkAbove(it.Path, set, it.Action != planner.Delete); l != "" {
				add(it.Path, l)
			}
		}
		for _, c := range p.Clear {
			if l := linkAbove(c, set, false); l != "" {
				add(c, l)
			}
		}
	}
	if root.Properties().Symlinks {
		looked := map[string]string{} // folder -> the link at or above it ("": none)
		for _, it := range p.Items {
			if it.Action != planner.Delete || seen[it.Path] {
				continue
			}
			if reached(it.Path) {
				continue // reached without a link
			}
			dir := path.Dir(it.Path)
			if dir == "." {
				continue
			}
			l, err := linkOn(ctx, root, dir, looked)
			if err != nil {
				return fmt.Errorf("plan in %s: %w", root, err)
			}
			if l != "" {
				add(it.Path, l)
			}
		}
	}
	if len(through) == 0 {
		return nil
	}
	slices.Sort(through)
	slices.Sort(found)
	return fmt.Errorf("%s: planned path(s) %s: %w; %s", root, summarize(through), storage.ErrSymlink, SymlinkFix(root.String(), found))
}

// linkAbove returns the link in set that is a folder on the way to p, or
// p itself when self; "" when none.
func linkAbove(p string, set map[string]bool, self bool) string {
	for i := strings.IndexByte(p, '/'); i >= 0; i = nextSlash(p, i) {
		if set[p[:i]] {
			return p[:i]
		}
	}
	if self && set[p] {
		return p
	}
	return ""
}

func nextSlash(p string, i int) int {
	j := strings.IndexByte(p[i+1:], '/')
	if j < 0 {
		return -1
	}
	return i + 1 + j
}

// linkOn returns the symbolic link that p or a folder on the way to it
// is, "" when none, by a Stat of each from the top: a backend refuses a
// link with storage.ErrSymlink, and a folder is no object. looked (nil:
// none) remembers the answers for other paths.
func linkOn(ctx context.Context, root storage.Backend, p string, looked map[string]string) (string, error) {
	for i := strings.IndexByte(p, '/'); ; i = nextSlash(p, i) {
		at := p
		if i >= 0 {
			at = p[:i]
		}
		l, ok := looked[at]
		if !ok {
			_, err := root.Stat(ctx, at)
			switch {
			case errors.Is(err, storage.ErrSymlink):
				l = at
			case err != nil && !errors.Is(err, storage.ErrNotExist):
				return "", err
			}
			if looked != nil {
				looked[at] = l
			}
		}
		if l != "" || i < 0 {
			return l, nil
		}
	}
}
