package s3_test

import (
	"bytes"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/distributor/distributor/storage"
	s3store "github.com/distributor/distributor/storage/s3"
	"github.com/distributor/distributor/testenv"
)

// BenchmarkPut4KiB puts 1000 objects of 4 KiB per iteration against the
// in-process server, one at a time and from 8 workers.
func BenchmarkPut4KiB(b *testing.B) {
	const objects, size = 1000, 4 << 10
	data := bytes.Repeat([]byte{'x'}, size)
	opts := storage.PutOptions{SHA256: sha(data), ContentType: "text/plain"}
	for _, workers := range []int{1, 8} {
		b.Run(fmt.Sprintf("workers=%d", workers), func(b *testing.B) {
			env := testenv.NewS3(b)
			be := env.Backend(b, env.Bucket(b), "bench")
			b.SetBytes(objects * size)
			b.ReportAllocs()
			for b.Loop() {
				jobs := make(chan int)
				var wg sync.WaitGroup
				for range workers {
					wg.Go(func() {
						for i := range jobs {
							if _, err := be.Put(b.Context(), fmt.Sprintf("obj/%04d", i), bytes.NewReader(data), size, opts); err != nil {
								b.Error(err)
							}
						}
					})
				}
				for i := range objects {
					jobs <- i
				}
				close(jobs)
				wg.Wait()
			}
			b.ReportMetric(float64(objects*b.N)/b.Elapsed().Seconds(), "objects/s")
		})
	}
}

// BenchmarkPut64MiB streams 64 MiB from a plain reader (multipart, default
// 8 MiB parts, 4 in flight) to gofakes3 in this process ("inproc": the heap
// figure includes the server's copies of the object) and in a child process
// ("process": the heap figure is the client's alone).
func BenchmarkPut64MiB(b *testing.B) {
	const size = 64 << 20
	for _, where := range []string{"inproc", "process"} {
		b.Run("server="+where, func(b *testing.B) {
			var be storage.Backend
			if where == "inproc" {
				env := testenv.NewS3(b)
				be = env.Backend(b, env.Bucket(b), "bench")
			} else {
				client := clientFor(startHelperServer(b))
				if _, err := client.CreateBucket(b.Context(), &s3.CreateBucketInput{Bucket: aws.String("bench")}); err != nil {
					b.Fatal(err)
				}
				var err error
				if be, err = s3store.NewFromClient(client, "bench", "", s3store.Options{}); err != nil {
					b.Fatal(err)
				}
			}
			b.SetBytes(size)
			var peak uint64
			for b.Loop() {
				p, _, err := measureHeap(func() error {
					_, err := be.Put(b.Context(), "big.bin", io.LimitReader(rand.NewChaCha8([32]byte{3}), size), size, storage.PutOptions{})
					return err
				})
				if err != nil {
					b.Fatal(err)
				}
				peak = max(peak, p)
			}
			b.ReportMetric(float64(peak)/(1<<20), "peak-heap-MiB")
		})
	}
}

// BenchmarkPut20x64MiB is a first publish of 20 × 64 MiB from 4 workers
// (Engine.Workers' default) to a server in a child process, with the
// default memory budget and with none (run with -benchtime 1x). It reports
// the client's peak heap growth and peak resident set.
func BenchmarkPut20x64MiB(b *testing.B) {
	const objects, size, workers = 20, 64 << 20, 4
	client := clientFor(startHelperServer(b))
	if _, err := client.CreateBucket(b.Context(), &s3.CreateBucketInput{Bucket: aws.String("bench")}); err != nil {
		b.Fatal(err)
	}
	for _, budget := range []int64{0, 1 << 40} {
		name := "budget=default"
		if budget != 0 {
			name = "budget=none"
		}
		b.Run(name, func(b *testing.B) {
			be, err := s3store.NewFromClient(client, "bench", "", s3store.Options{MemoryBudget: budget})
			if err != nil {
				b.Fatal(err)
			}
			b.SetBytes(objects * size)
			var peak uint64
			var rss int64
			for b.Loop() {
				resetPeakRSS(b)
				p, _, err := measureHeap(func() error {
					jobs := make(chan int)
					errs := make(chan error, objects)
					var wg sync.WaitGroup
					for range workers {
						wg.Go(func() {
							for i := range jobs {
								_, err := be.Put(b.Context(), fmt.Sprintf("big/%02d.bin", i), io.LimitReader(rand.NewChaCha8([32]byte{byte(i)}), size), size, storage.PutOptions{})
								errs <- err
							}
						})
					}
					for i := range objects {
						jobs <- i
					}
					close(jobs)
					wg.Wait()
					close(errs)
					var all []error
					for err := range errs {
						all = append(all, err)
					}
					return errors.Join(all...)
				})
				if err != nil {
					b.Fatal(err)
				}
				peak = max(peak, p)
				rss = max(rss, peakRSS(b))
			}
			b.ReportMetric(float64(peak)/(1<<20), "peak-heap-MiB")
			b.ReportMetric(float64(rss)/1e6, "peak-rss-MB")
		})
	}
}

// resetPeakRSS restarts the kernel's count of the peak resident set (VmHWM).
func resetPeakRSS(b *testing.B) {
	runtime.GC()
	debug.FreeOSMemory()
	if err := os.WriteFile("/proc/self/clear_refs", []byte("5"), 0); err != nil {
		b.Skipf("cannot reset the peak RSS: %v", err)
	}
}

// peakRSS is VmHWM in bytes.
func peakRSS(b *testing.B) int64 {
	data, err := os.ReadFile("/proc/self/status")
	if err != nil {
		b.Fatal(err)
	}
	for line := range strings.Lines(string(data)) {
		if v, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			if err != nil {
				b.Fatal(err)
			}
			return kb << 10
		}
	}
	b.Fatal("no VmHWM in /proc/self/status")
	return 0
}

// BenchmarkStageLarge stages and commits one 320 MiB object (over
// SinglePutMax: a multipart upload of 8 MiB parts) to a server in a child
// process, with 1 and 4 parts in flight. It reports the client's peak
// resident set (run with -benchtime 1x).
func BenchmarkStageLarge(b *testing.B) {
	const size = 320 << 20
	src := func() io.Reader { return io.LimitReader(rand.NewChaCha8([32]byte{7}), size) }
	h := sha256.New()
	if _, err := io.Copy(h, src()); err != nil {
		b.Fatal(err)
	}
	digest := fmt.Sprintf("sha256:%x", h.Sum(nil))
	client := clientFor(startHelperServer(b))
	if _, err := client.CreateBucket(b.Context(), &s3.CreateBucketInput{Bucket: aws.String("bench")}); err != nil {
		b.Fatal(err)
	}
	for _, inflight := range []int{1, 4} {
		b.Run(fmt.Sprintf("parts=%d", inflight), func(b *testing.B) {
			be, err := s3store.NewFromClient(client, "bench", "", s3store.Options{Concurrency: inflight})
			if err != nil {
				b.Fatal(err)
			}
			b.SetBytes(size)
			var rss int64
			for b.Loop() {
				resetPeakRSS(b)
				st := be.Stage(b.Context())
				if _, err := st.Put(b.Context(), "big.bin", readerSource(src()), size, storage.PutOptions{SHA256: digest, SourceVerified: true}); err != nil {
					b.Fatal(err)
				}
				if _, err := st.Commit(b.Context(), "big.bin"); err != nil {
					b.Fatal(err)
				}
				if err := st.Close(); err != nil {
					b.Fatal(err)
				}
				rss = max(rss, peakRSS(b))
			}
			b.ReportMetric(float64(rss)/1e6, "peak-rss-MB")
		})
	}
}
