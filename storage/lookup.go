package storage

import (
	"context"
	"errors"
	"strings"
)

// LookUp is Backend.Find by lookups, for a backend's Find to use when
// paths are few against what the root holds: it stats each path and each
// folder on the way to it, and lists under each path that holds no
// object (a folder: whatever is below is in the way). A path the root
// refuses (a symlink on the way, say) makes it list the whole root
// instead, which skips what it cannot use.
func LookUp(ctx context.Context, b Backend, paths []string, fn func(ObjectInfo) error) error {
	found := map[string]ObjectInfo{}
	seen := map[string]bool{}
	stat := func(p string) (bool, error) {
		if seen[p] {
			_, ok := found[p]
			return ok, nil
		}
		seen[p] = true
		o, err := b.Stat(ctx, p)
		if errors.Is(err, ErrNotExist) {
			return false, nil
		}
		if err != nil {
			return false, err
		}
		found[p] = o
		return true, nil
	}
	for _, p := range paths {
		var err error
		for i := strings.IndexByte(p, '/'); i >= 0 && err == nil; i = nextSlash(p, i) {
			_, err = stat(p[:i])
		}
		var ok bool
		if err == nil {
			ok, err = stat(p)
		}
		if err == nil && !ok {
			err = b.List(ctx, p+"/", func(o ObjectInfo) error {
				found[o.Path] = o
				return nil
			})
		}
		if err != nil {
			if ctx.Err() != nil {
				return err
			}
			return b.List(ctx, "", fn)
		}
	}
	for _, o := range found {
		if err := fn(o); err != nil {
			return err
		}
	}
	return nil
}

func nextSlash(p string, i int) int {
	j := strings.IndexByte(p[i+1:], '/')
	if j < 0 {
		return -1
	}
	return i + 1 + j
}
