package s3

import (
	"bytes"
	"crypto/sha256"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"syscall"
	"testing"
	"testing/iotest"
)

// A document written in pieces of any sizes reads back whole, from any
// offset, and seeks as a request body must (iotest.TestReader), with its
// sha256, whether it stays in memory or goes to a file part way; the
// file is gone once the spool is closed.
func TestSpoolReadsBackWhatWasWritten(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	dir := t.TempDir()
	for round := range 300 {
		inMemory := []int64{-1, 0, 1, 64, 200, 1 << 20}[rng.IntN(6)]
		s := newSpool(inMemory, dir)
		var want []byte
		for range rng.IntN(12) {
			b := make([]byte, rng.IntN(40))
			for i := range b {
				b[i] = byte(rng.IntN(256))
			}
			want = append(want, b...)
			if n, err := s.Write(b); n != len(b) || err != nil {
				t.Fatalf("round %d: Write = %d, %v", round, n, err)
			}
			clear(b) // the writer reuses its buffer
		}
		if inFile := s.file != nil; inFile != (inMemory >= 0 && int64(len(want)) > inMemory) {
			t.Fatalf("round %d: %d bytes, %d in memory at most: in a file %v", round, len(want), inMemory, inFile)
		}
		if s.file != nil && s.parts != nil {
			t.Fatalf("round %d: the bytes are in a file and %d pieces in memory", round, len(s.parts))
		}
		if err := iotest.TestReader(s.reader(), want); err != nil {
			t.Fatalf("round %d: %v", round, err)
		}
		got, err := io.ReadAll(s.reader())
		if err != nil || !bytes.Equal(got, want) {
			t.Fatalf("round %d: read %q, %v; want %q", round, got, err, want)
		}
		if s.sum() != sha256.Sum256(want) {
			t.Fatalf("round %d: the sum is not the bytes' sha256", round)
		}
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
		if left, _ := os.ReadDir(dir); len(left) != 0 {
			t.Fatalf("round %d: closed, the spool left %v", round, left)
		}
	}
}

// A large document is held in a file, not in memory: 64 MiB written
// through a spool of the default size grow the heap by the pieces kept
// before it filled, not by the document.
func TestSpoolHoldsNotALargeDocument(t *testing.T) {
	s := newSpool(defaultCatalogInMemory, t.TempDir())
	defer s.Close()
	runtime.GC()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	chunk := bytes.Repeat([]byte("0123456789abcdef"), 4096) // 64 KiB, as an encoder writes
	const total = 64 << 20
	for range total / len(chunk) {
		if _, err := s.Write(chunk); err != nil {
			t.Fatal(err)
		}
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	if grown := int64(after.HeapAlloc) - int64(before.HeapAlloc); grown > 4<<20 {
		t.Errorf("a spool of %d MiB holds %d KiB of heap, want less than 4 MiB", total>>20, grown>>10)
	}
	if s.reader().Size() != total {
		t.Errorf("the spool reads %d bytes, want %d", s.reader().Size(), total)
	}
}

// Where no temporary file can be made, the document stays in memory and
// reads back whole.
func TestSpoolWithoutATemporaryFolderKeepsTheBytes(t *testing.T) {
	s := newSpool(10, filepath.Join(t.TempDir(), "missing"))
	defer s.Close()
	want := bytes.Repeat([]byte("catalog "), 100)
	for i := 0; i < len(want); i += 7 {
		if _, err := s.Write(want[i:min(i+7, len(want))]); err != nil {
			t.Fatal(err)
		}
	}
	if s.file != nil {
		t.Fatalf("a spool without its folder made %s", s.file.Name())
	}
	got, err := io.ReadAll(s.reader())
	if err != nil || !bytes.Equal(got, want) {
		t.Fatalf("read %d bytes, %v; want the %d written", len(got), err, len(want))
	}
}

// fullFile is a temporary file that takes room bytes and then fails, as
// a full disk does; a write that does not fit writes what fits.
type fullFile struct {
	*os.File
	room int
}

func (f *fullFile) Write(b []byte) (int, error) {
	n := min(len(b), f.room)
	n, err := f.File.Write(b[:n])
	f.room -= n
	if err == nil && n < len(b) {
		err = syscall.ENOSPC
	}
	return n, err
}

// A temporary file that runs out of room, while the bytes move into it or
// later, hands them back to memory: the document reads back whole and
// nothing is left in the folder.
func TestSpoolOutOfRoomKeepsTheBytes(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	dir := t.TempDir()
	for round := range 200 {
		room := rng.IntN(300)
		s := newSpool(int64(rng.IntN(100)), dir)
		s.create = func(dir, pattern string) (spoolFile, error) {
			f, err := os.CreateTemp(dir, pattern)
			return &fullFile{File: f, room: room}, err
		}
		told := 0
		s.inMemoryAfter = func(error) { told++ }
		var want []byte
		for range rng.IntN(20) {
			b := make([]byte, rng.IntN(50))
			for i := range b {
				b[i] = byte(rng.IntN(256))
			}
			want = append(want, b...)
			if n, err := s.Write(b); n != len(b) || err != nil {
				t.Fatalf("round %d: Write = %d, %v", round, n, err)
			}
			clear(b)
		}
		got, err := io.ReadAll(s.reader())
		if err != nil || !bytes.Equal(got, want) {
			t.Fatalf("round %d (room %d): read %d bytes, %v; want the %d written", round, room, len(got), err, len(want))
		}
		if s.sum() != sha256.Sum256(want) {
			t.Fatalf("round %d: the sum is not the bytes' sha256", round)
		}
		if s.file != nil && len(want) > room {
			t.Fatalf("round %d: %d bytes in a file of room %d", round, len(want), room)
		}
		fellBack := s.inMemory < 0 // the limits drawn here are never negative
		if told != btoi(fellBack) {
			t.Fatalf("round %d: told %d times why the bytes stay in memory; fell back %v", round, told, fellBack)
		}
		if fellBack && len(want) <= room {
			t.Fatalf("round %d: %d bytes fell back to memory from a file with room for %d", round, len(want), room)
		}
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
		if left, _ := os.ReadDir(dir); len(left) != 0 {
			t.Fatalf("round %d: closed, the spool left %v", round, left)
		}
	}
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}
