package engine_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/distributor/distributor/catalog"
	"github.com/distributor/distributor/engine"
	"github.com/distributor/distributor/lease"
	"github.com/distributor/distributor/storage"
)

// Status sums a root's catalog up per owner and source version (newest
// first; two versions side by side in an additive root), names the lock
// object's holder, and changes nothing.
func TestStatusSumsUpOwnersAndVersions(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, newRoot newRootFunc) {
		ctx := context.Background()
		root, d := newRoot(t)
		e := &engine.Engine{Version: "test"}
		st, err := e.Status(ctx, root, engine.StatusOptions{Leftovers: true})
		if err != nil || st.Catalog || st.Owners != nil || st.Lock != nil || st.PendingRecovery || st.Leftovers == nil || st.Leftovers.Count != 0 {
			t.Fatalf("empty root: %+v, %v", st, err)
		}

		at := time.Date(2026, 6, 19, 12, 0, 0, 0, time.UTC)
		src := func(n int) catalog.Source {
			return catalog.Source{ID: "w.today", Digest: fmt.Sprintf("sha256:%064x", n), Created: at.Add(time.Duration(n) * time.Hour)}
		}
		rec := func(path, pipeline, dest string, s catalog.Source, size int64, updated time.Duration) catalog.Output {
			return catalog.Output{Path: path, PipelineID: pipeline, DestinationID: dest, Source: s, Kind: catalog.KindSource,
				SHA256: "sha256:" + strings.Repeat("a", 64), Size: size, CreatedAt: at, UpdatedAt: at.Add(updated)}
		}
		cat := &catalog.Catalog{DistributorVersion: "test", CreatedAt: at, UpdatedAt: at.Add(time.Hour), Outputs: []catalog.Output{
			rec("a.txt", "p.a", "site", src(2), 10, time.Minute),
			rec("b.txt", "p.a", "site", src(1), 20, 0),
			rec("c.txt", "p.a", "site", src(2), 30, 2*time.Minute),
			rec("d.txt", "p.b", "site", src(1), 40, 0),
			rec("e.txt", "p.a", "mirror", src(1), 50, 0),
		}}
		data, err := catalog.Marshal(cat)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := root.WriteIfVersion(ctx, catalog.FileName, data, ""); err != nil {
			t.Fatal(err)
		}
		l, err := lease.NewStorageLocker("apply test", time.Minute).Acquire(ctx, lease.Root{Key: d.RootKey(), Store: root})
		if err != nil {
			t.Fatal(err)
		}
		defer l.Release(ctx)
		before := snapshotRoot(t, root)

		st, err = e.Status(ctx, root, engine.StatusOptions{})
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, o := range st.Owners {
			line := fmt.Sprintf("%s %d %d:", o.Owner, o.Outputs, o.Bytes)
			for _, s := range o.Sources {
				line += fmt.Sprintf(" %s %d %d %s", s.Source.Digest[len(s.Source.Digest)-1:], s.Outputs, s.Bytes, s.UpdatedAt.Sub(at))
			}
			got = append(got, line)
		}
		want := []string{"p.a/mirror 1 50: 1 1 50 0s", "p.a/site 3 60: 2 2 40 2m0s 1 1 20 0s", "p.b/site 1 40: 1 1 40 0s"}
		if strings.Join(got, "; ") != strings.Join(want, "; ") {
			t.Errorf("owners\n got %q\nwant %q", got, want)
		}
		if !st.Catalog || st.Legacy || st.Outputs != 5 || st.Bytes != 150 || !st.UpdatedAt.Equal(at.Add(time.Hour)) || st.Leftovers != nil ||
			st.Lock == nil || st.Lock.Holder != "apply test" || st.Lock.Stale {
			t.Errorf("status %+v, lock %+v", st, st.Lock)
		}
		if after := snapshotRoot(t, root); after != before {
			t.Errorf("status changed the root:\n%s\nwas\n%s", after, before)
		}
	})
}

// snapshotRoot lists a root's objects with their sizes and fingerprints.
func snapshotRoot(t *testing.T, root storage.Backend) string {
	t.Helper()
	var b strings.Builder
	if err := root.List(context.Background(), "", func(o storage.ObjectInfo) error {
		fmt.Fprintf(&b, "%s %d %v\n", o.Path, o.Size, o.Fingerprint)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return b.String()
}
