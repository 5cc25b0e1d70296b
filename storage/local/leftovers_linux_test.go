package local

import (
	"bytes"
	"fmt"
	"io/fs"
	"path/filepath"
	"testing"

	"github.com/distributor/distributor/storage"
)

// A write of a new path (PutOptions.IfAbsent, what publications use for
// new outputs) killed half-way leaves nothing at all in the tree: the
// bytes went to an unnamed file (O_TMPFILE), named only when complete.
func TestKilledNewPathWriteLeavesNothing(t *testing.T) {
	t.Parallel()
	b := newBackend(t)
	if b.noTmpfile.Load() {
		t.Skip("this filesystem has no O_TMPFILE")
	}
	killDuringPut(t, b, "dir/new.bin", 4<<20, true)
	var names []string
	err := filepath.WalkDir(b.String(), func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			names = append(names, p)
		}
		return err
	})
	if err != nil || len(names) != 0 {
		t.Fatalf("files left in the root after a killed write of a new path: %q, %v; want none", names, err)
	}
}

// BenchmarkPutNew4KiB: writes of new paths as publications make them
// (IfAbsent, DeferSync), through an unnamed file and through a named temp
// file, to compare the two.
func BenchmarkPutNew4KiB(b *testing.B) {
	data := bytes.Repeat([]byte("x"), 4<<10)
	for _, named := range []bool{false, true} {
		b.Run(map[bool]string{false: "unnamed", true: "named"}[named], func(b *testing.B) {
			be := newBackend(b)
			if named {
				be.noTmpfile.Store(true)
			} else if be.noTmpfile.Load() {
				b.Skip("no O_TMPFILE here")
			}
			b.SetBytes(int64(len(data)))
			for i := 0; b.Loop(); i++ {
				p := fmt.Sprintf("d%02d/f%06d", i%20, i)
				if _, err := be.Put(b.Context(), p, bytes.NewReader(data), int64(len(data)), storage.PutOptions{IfAbsent: true, DeferSync: true}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
