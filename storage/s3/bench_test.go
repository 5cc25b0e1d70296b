package s3_test

import (
	"bytes"
	"fmt"
	"io"
	"math/rand/v2"
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
