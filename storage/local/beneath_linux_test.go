package local

import (
	"errors"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/distributor/distributor/storage"
	"github.com/distributor/distributor/storage/storagetest"
)

// The contract holds on the general path too (kernels without openat2).
func TestContractWithoutOpenat2(t *testing.T) {
	t.Parallel()
	storagetest.Run(t, func(t *testing.T) storage.Backend {
		b := newBackend(t)
		b.noOpenat2.Store(true)
		return b
	})
}

// A FIFO where an object is read is refused at once, never waited on.
func TestOpenRefusesAFIFOWithoutWaiting(t *testing.T) {
	t.Parallel()
	for _, general := range []bool{false, true} {
		b := newBackend(t)
		b.noOpenat2.Store(general)
		must(t, syscall.Mkfifo(filepath.Join(b.root, "fifo"), 0o644))
		done := make(chan error, 2)
		go func() {
			_, err := b.Open(t.Context(), "fifo")
			done <- err
			_, err = b.Stat(t.Context(), "fifo")
			done <- err
		}()
		for _, op := range []string{"Open", "Stat"} {
			select {
			case err := <-done:
				if err == nil || !strings.Contains(err.Error(), "is not a regular file") {
					t.Errorf("general=%t: %s(fifo) error = %v, want \"is not a regular file\"", general, op, err)
				}
			case <-time.After(5 * time.Second):
				t.Fatalf("general=%t: %s(fifo) is waiting for a writer", general, op)
			}
		}
	}
}

// A file where a folder of the path would be means the object is not
// there, on both paths.
func TestStatThroughAFileIsNotExist(t *testing.T) {
	t.Parallel()
	for _, general := range []bool{false, true} {
		b := newBackend(t)
		b.noOpenat2.Store(general)
		_, err := b.Put(t.Context(), "f", strings.NewReader("x"), 1, storage.PutOptions{})
		must(t, err)
		if _, err := b.Stat(t.Context(), "f/g"); !errors.Is(err, storage.ErrNotExist) {
			t.Errorf("general=%t: Stat(f/g) error = %v, want ErrNotExist", general, err)
		}
		if _, err := b.Open(t.Context(), "f/g"); !errors.Is(err, storage.ErrNotExist) {
			t.Errorf("general=%t: Open(f/g) error = %v, want ErrNotExist", general, err)
		}
	}
}
