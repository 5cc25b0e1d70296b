package local

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/distributor/distributor/testenv"
)

// A descriptor opened O_NONBLOCK (as readBeneath opens bundle files) that
// answers EAGAIN is switched to blocking reads, not failed: a pipe stands
// in for a file system that would honour the flag.
func TestFdFileReadBlocksAfterEAGAIN(t *testing.T) {
	t.Parallel()
	var p [2]int
	if err := unix.Pipe2(p[:], unix.O_NONBLOCK|unix.O_CLOEXEC); err != nil {
		t.Fatal(err)
	}
	// The write end is closed once, below, or here on an early failure:
	// a second close could close another test's file that reused the
	// number (parallel tests saw "not a directory" from a stage's folder).
	writer := p[1]
	defer func() {
		if writer >= 0 {
			unix.Close(writer)
		}
	}()
	f := newFdFile(p[0], "pipe")
	defer f.Close()
	type result struct {
		b   string
		err error
	}
	got := make(chan result, 1)
	go func() {
		buf := make([]byte, 8)
		n, err := f.Read(buf)
		got <- result{string(buf[:n]), err}
	}()
	// The empty pipe answered EAGAIN once the flag is gone.
	testenv.Eventually(t, 10*time.Second, func() bool {
		fl, err := unix.FcntlInt(uintptr(p[0]), unix.F_GETFL, 0)
		return err == nil && fl&unix.O_NONBLOCK == 0
	}, "the read to clear O_NONBLOCK")
	if _, err := unix.Write(p[1], []byte("bytes")); err != nil {
		t.Fatal(err)
	}
	if r := <-got; r.err != nil || r.b != "bytes" {
		t.Fatalf("Read = %q, %v; want the bytes written", r.b, r.err)
	}
	unix.Close(writer)
	writer = -1
	if n, err := f.Read(make([]byte, 8)); n != 0 || err != io.EOF {
		t.Fatalf("Read after the writer closed = %d, %v; want 0, EOF", n, err)
	}
}

// A file opened by readBeneath reads to the size its fstat gave and ends
// there, in as many reads as the data needs: nothing is lost when the
// buffer is larger or smaller than the file, and an empty file ends at once.
func TestFdFileReadsToItsSize(t *testing.T) {
	t.Parallel()
	b := newBackend(t)
	for _, size := range []int{0, 1, 4096, 5000} {
		data := bytes.Repeat([]byte{'x'}, size)
		name := fmt.Sprintf("f%d", size)
		if err := os.WriteFile(filepath.Join(b.root, name), data, 0o644); err != nil {
			t.Fatal(err)
		}
		for _, bufSize := range []int{1000, 4096, 32 << 10} {
			f, ok, err := b.readBeneath(name)
			if !ok || err != nil {
				t.Fatalf("readBeneath(%s) = %v, %v", name, ok, err)
			}
			got, err := io.ReadAll(f)
			f.Close()
			if err != nil || !bytes.Equal(got, data) {
				t.Fatalf("%s: read %d bytes (%v), want %d", name, len(got), err, size)
			}
			f, _, _ = b.readBeneath(name)
			buf := make([]byte, bufSize)
			total := 0
			for {
				n, err := f.Read(buf)
				total += n
				if err == io.EOF {
					break
				}
				if err != nil {
					t.Fatal(err)
				}
			}
			f.Close()
			if total != size {
				t.Fatalf("%s with a %d-byte buffer: %d bytes to EOF, want %d", name, bufSize, total, size)
			}
		}
	}
}
