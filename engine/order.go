package engine

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/bmatcuk/doublestar/v4"

	"github.com/distributor/distributor/planner"
)

// GroupOf returns the group in which a write of path becomes visible
// under a destination's publish_last globs: 0 for a path no glob matches
// (visible first), i+1 for one whose first matching glob is
// publishLast[i]. The globs are doublestar patterns over output paths,
// validated with the configuration.
func GroupOf(path string, publishLast []string) int {
	for i, g := range publishLast {
		if ok, _ := doublestar.Match(g, path); ok {
			return i + 1
		}
	}
	return 0
}

// visibilityGroups splits writes into the groups made visible one after
// another (GroupOf), in group order, leaving out empty ones. Without
// globs it is writes itself, one group.
func visibilityGroups(writes []planner.Item, publishLast []string) [][]planner.Item {
	if len(publishLast) == 0 {
		return [][]planner.Item{writes}
	}
	groups := make([][]planner.Item, len(publishLast)+1)
	for _, it := range writes {
		g := GroupOf(it.Path, publishLast)
		groups[g] = append(groups[g], it)
	}
	return slices.DeleteFunc(groups, func(g []planner.Item) bool { return len(g) == 0 })
}

// writeGroups makes the writes visible group by group: a group's first
// output is named only once every output of the groups before it is
// visible and durable (a flush of the root between groups), so a reader
// that sees an output of a later group finds the earlier groups' outputs
// of the same version, and so does the root after a crash. It returns
// what it wrote, in path order.
func (r *publication) writeGroups(ctx context.Context) ([]planner.Item, error) {
	groups := visibilityGroups(r.writes, r.pub.PublishLast)
	var written []planner.Item
	for i, g := range groups {
		if i > 0 {
			if err := r.root.Sync(ctx); err != nil {
				return written, fmt.Errorf("sync %s before the next publish_last group: %w", r.root, err)
			}
		}
		done, err := r.e.writeAll(ctx, r.root, r.l, r.pub, g, r.content, r.pl.stored, r.pl.fps, r.stg)
		written = append(written, done...)
		if err != nil {
			return sortedItems(written), err
		}
	}
	return sortedItems(written), nil
}

func sortedItems(items []planner.Item) []planner.Item {
	if !slices.IsSortedFunc(items, byItemPath) {
		slices.SortFunc(items, byItemPath)
	}
	return items
}

func byItemPath(a, b planner.Item) int { return strings.Compare(a.Path, b.Path) }
