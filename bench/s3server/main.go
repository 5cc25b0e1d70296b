// Command s3server serves an in-memory S3 server (gofakes3, with the
// listings of testenv/fakes3, as the tests use it) on a free
// loopback port for the bench harness, in a process of its own so that the
// objects it holds do not count in the harness's memory (a child the
// harness starts inherits the harness's peak RSS in getrusage). With S3SERVER_LOG set it logs every request to stderr;
// S3SERVER_CPUPROFILE=FILE writes a CPU profile of it until stdin closes;
// POST /_bench/cpuprofile?file=FILE starts one, POST /_bench/cpuprofile
// stops it. It prints
// its URL and serves until its stdin closes. Besides S3 it answers
// POST /_bench/create?bucket=NAME and POST /_bench/drop?bucket=NAME (the
// bucket with all its objects), which the harness calls between runs, and
// POST /_bench/gc, which collects the garbage earlier runs left and
// returns the memory freed to the system, before each timed run.
package main

import (
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"runtime/debug"
	"runtime/pprof"
	"strings"
	"sync"
	"time"

	"github.com/johannesboyne/gofakes3"
	"github.com/johannesboyne/gofakes3/backend/s3mem"

	"github.com/distributor/distributor/testenv/fakes3"
)

func main() {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		fmt.Fprintln(os.Stderr, "s3server:", err)
		os.Exit(1)
	}
	fake := fakes3.New(gofakes3.WithLogger(gofakes3.DiscardLog()))
	mem := fake.Mem
	var s3 http.Handler = fake
	prof := &profiler{}
	if os.Getenv("S3SERVER_LOG") != "" {
		s3 = logRequests(s3) // to count and time a tool's requests
	}
	srv := &http.Server{
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if !strings.HasPrefix(r.URL.Path, "/_bench/") { // not a bucket name: those start with a letter or digit
				s3.ServeHTTP(w, r)
				return
			}
			admin(mem, prof, w, r)
		}),
		// gofakes3 writes headers twice on requests the client abandoned.
		ErrorLog:          log.New(io.Discard, "", 0),
		ReadHeaderTimeout: time.Minute,
	}
	go func() {
		_ = srv.Serve(ln)
	}()
	stop := startProfile(os.Getenv("S3SERVER_CPUPROFILE"))
	fmt.Printf("http://%s\n", ln.Addr())
	_, _ = io.Copy(io.Discard, os.Stdin)
	stop()
}

// startProfile writes a CPU profile of the server to path (none when
// empty) until the returned function is called: the server's CPU per
// request counts, as it shares the cores with the client.
func startProfile(path string) func() {
	if path == "" {
		return func() {}
	}
	f, err := os.Create(path)
	if err == nil {
		err = pprof.StartCPUProfile(f)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "s3server: cpuprofile:", err)
		return func() {}
	}
	return func() {
		pprof.StopCPUProfile()
		_ = f.Close()
	}
}

// profiler is the CPU profile /_bench/cpuprofile starts and stops.
type profiler struct {
	mu sync.Mutex
	f  *os.File
}

// control starts a CPU profile into file, or stops the running one
// (file "").
func (p *profiler) control(file string) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.f != nil {
		pprof.StopCPUProfile()
		err := p.f.Close()
		p.f = nil
		if err != nil || file == "" {
			return err
		}
	}
	if file == "" {
		return nil
	}
	f, err := os.Create(file)
	if err != nil {
		return err
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return err
	}
	p.f = f
	return nil
}

// logRequests writes a line per request to stderr: the time of day it
// ended (to line up with a client's own clock), the time since the server
// started, the time the request took, its method and path.
func logRequests(h http.Handler) http.Handler {
	start := time.Now()
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		t := time.Now()
		h.ServeHTTP(w, r)
		now := time.Now()
		fmt.Fprintf(os.Stderr, "s3server: %s %9.1f ms %7.1f ms %s %s?%s\n", now.UTC().Format("15:04:05.000000"),
			float64(now.Sub(start).Microseconds())/1000,
			float64(now.Sub(t).Microseconds())/1000, r.Method, r.URL.Path, r.URL.RawQuery)
	})
}

// admin creates or drops the bucket named in the query, or starts
// (?file=PATH) or stops (no file) a CPU profile of the server: one that
// leaves out the seeding of a republish's bucket.
func admin(mem *s3mem.Backend, prof *profiler, w http.ResponseWriter, r *http.Request) {
	bucket := r.URL.Query().Get("bucket")
	var err error
	switch r.URL.Path {
	case "/_bench/cpuprofile":
		err = prof.control(r.URL.Query().Get("file"))
	case "/_bench/gc":
		// A run starts with nothing of earlier runs left to collect,
		// sweep or return to the system: which run would pay for that
		// depends on the order of the runs, not on the tool.
		debug.FreeOSMemory()
	case "/_bench/create":
		err = mem.CreateBucket(bucket)
	case "/_bench/drop":
		err = mem.ForceDeleteBucket(bucket)
	default:
		http.NotFound(w, r)
		return
	}
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
	}
}
