package local

import (
	"context"
	"fmt"
	"io/fs"
	"path"
	"sort"
	"strings"
	"time"

	"github.com/distributor/distributor/catalog"
	"github.com/distributor/distributor/storage"
)

// isLeftover reports whether p names a file only an interrupted write can
// leave: a temp name anywhere, or anything in the temp folder that earlier
// versions wrote into.
func isLeftover(p string) bool {
	return catalog.IsTempName(path.Base(p)) || strings.HasPrefix(p, tmpDir+"/")
}

// Leftovers walks the whole root (every folder, never through a symlink)
// for temp files last written before cutoff. A write in flight keeps its
// temp file's modification time recent.
func (b *Backend) Leftovers(ctx context.Context, cutoff time.Time) ([]storage.Leftover, error) {
	var out []storage.Leftover
	err := fs.WalkDir(b.r.FS(), ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			if isMissing(err) {
				return nil // removed while walking
			}
			return err
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		if d.IsDir() || !d.Type().IsRegular() || !isLeftover(p) {
			return nil
		}
		fi, err := d.Info()
		if isMissing(err) {
			return nil // renamed into place or removed meanwhile
		}
		if err != nil {
			return err
		}
		if fi.ModTime().Before(cutoff) {
			out = append(out, storage.Leftover{Path: p, Size: fi.Size(), ModTime: fi.ModTime()})
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("look for leftovers in %s: %w", b.root, err)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Path < out[j].Path })
	return out, nil
}

// RemoveLeftovers removes the temp files and the folders they leave empty
// (as Delete does). It refuses any path that is not a temp file's, so it
// cannot remove an object.
func (b *Backend) RemoveLeftovers(ctx context.Context, ls []storage.Leftover) error {
	for _, l := range ls {
		if err := ctx.Err(); err != nil {
			return err
		}
		if err := catalog.ValidatePath(l.Path); err != nil || !isLeftover(l.Path) {
			return fmt.Errorf("remove leftover %q in %s: not a temp file's path: pass what Leftovers returned", l.Path, b.root)
		}
		if d := path.Dir(l.Path); d != "." {
			if err := b.checkPath(b.r, d); err != nil {
				return err
			}
		}
		if _, err := b.remove(b.r, l.Path); err != nil {
			return fmt.Errorf("remove leftover: %w", err)
		}
	}
	return nil
}
