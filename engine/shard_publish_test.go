package engine_test

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/distributor/distributor/engine"
	"github.com/distributor/distributor/planner"
	"github.com/distributor/distributor/testenv"
)

// In a local root, a publication writes the fingerprint shard in place
// (same file, no new one: the engine allows it, storage.PutOptions.InPlace,
// and the local backend does it); a shard found torn is ignored (the
// outputs it held are read back once, none is vouched for by it) and
// rewritten, after which publications vouch from it again.
func TestFingerprintShardRewrittenInPlaceAndIgnoredWhenTorn(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	plain, base := newLocalRoot(t)
	counting := newCounting(plain)
	h.AddDest(named(base, "site", planner.Replacement), counting, pipeA)
	shard := engine.FingerprintsDir + "/1-00"
	file := filepath.Join(base.Path, filepath.FromSlash(shard))
	files := map[string]string{}
	for i := range 8 {
		files[fmt.Sprintf("f%d.txt", i)] = fmt.Sprintf("file %d\n", i)
	}
	at := t1
	inode := func() uint64 {
		t.Helper()
		return testenv.FileID(t, file)
	}
	publish := func(change int) {
		t.Helper()
		files["f0.txt"] = fmt.Sprintf("change %d\n", change)
		at = at.Add(time.Minute)
		counting.Reset()
		h.MustPublish(at, pipeA, "site", "weatherreporter.v", files)
	}
	publish(0) // the shard is created
	wantStrings(t, "first publication: shard written in place", counting.Calls("Overwrite"), []string{shard})
	wantStrings(t, "first publication: written whole", counting.Calls("Put"), []string{"f0.txt", "f1.txt", "f2.txt", "f3.txt", "f4.txt", "f5.txt", "f6.txt", "f7.txt"})
	first := inode()
	for change := 1; change <= 2; change++ {
		publish(change)
		wantStrings(t, "outputs read back", readBack(counting), nil)
		wantStrings(t, "shard rewritten in place", counting.Calls("Overwrite"), []string{shard})
		wantStrings(t, "written whole", counting.Calls("Put"), []string{"f0.txt"})
		if got := inode(); got != first {
			t.Fatalf("publication %d: the shard is a new file (inode %d, was %d)", change, got, first)
		}
	}
	// Torn: one byte of an entry changed (as a read mid-rewrite, or a crash,
	// may leave it).
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	data[len(data)-3] ^= 1
	if err := os.WriteFile(file, data, 0o644); err != nil {
		t.Fatal(err)
	}
	publish(3)
	wantStrings(t, "outputs read back after the torn shard", readBack(counting), []string{"f1.txt", "f2.txt", "f3.txt", "f4.txt", "f5.txt", "f6.txt", "f7.txt"})
	wantStrings(t, "torn shard rewritten in place", counting.Calls("Overwrite"), []string{shard})
	wantStrings(t, "written whole", counting.Calls("Put"), []string{"f0.txt"})
	publish(4)
	wantStrings(t, "outputs read back after the repair", readBack(counting), nil)
	wantStrings(t, "shard rewritten in place after the repair", counting.Calls("Overwrite"), []string{shard})
}
