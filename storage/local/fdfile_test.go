package local

import (
	"io"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/distributor/distributor/testenv"
)

// A descriptor opened O_NONBLOCK (as readBeneath opens bundle files) that
// answers EAGAIN is switched to blocking reads, not failed: a pipe stands
// in for a file system that would honour the flag.
func TestFdFileReadBlocksAfterEAGAIN(t *testing.T) {
	var p [2]int
	if err := unix.Pipe2(p[:], unix.O_NONBLOCK|unix.O_CLOEXEC); err != nil {
		t.Fatal(err)
	}
	defer unix.Close(p[1])
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
	unix.Close(p[1])
	if n, err := f.Read(make([]byte, 8)); n != 0 || err != io.EOF {
		t.Fatalf("Read after the writer closed = %d, %v; want 0, EOF", n, err)
	}
}
