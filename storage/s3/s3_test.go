package s3_test

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path"
	"runtime"
	"runtime/debug"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/smithy-go"
	"github.com/johannesboyne/gofakes3"
	"github.com/johannesboyne/gofakes3/backend/s3mem"

	"github.com/distributor/distributor/storage"
	"github.com/distributor/distributor/storage/probe"
	s3store "github.com/distributor/distributor/storage/s3"
	"github.com/distributor/distributor/storage/storagetest"
	"github.com/distributor/distributor/testenv"
)

// helperEnv makes the test binary serve gofakes3 instead of running tests,
// so that the memory test measures the client alone.
const helperEnv = "S3STORE_TEST_HELPER_SERVER"

func TestMain(m *testing.M) {
	if os.Getenv(helperEnv) == "1" {
		serveHelper()
		return
	}
	os.Exit(testenv.Main(m, testenv.MainOptions{Parallel: 8}))
}

// serveHelper serves gofakes3 on a free port, prints the URL, and stops
// when stdin closes (the parent test ended or died).
func serveHelper() {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	go http.Serve(ln, gofakes3.New(s3mem.New()).Server())
	fmt.Printf("http://%s\n", ln.Addr())
	io.Copy(io.Discard, os.Stdin)
}

// startHelperServer runs gofakes3 in a child process and returns its URL.
func startHelperServer(t testing.TB) string {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), helperEnv+"=1")
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		stdin.Close()
		cmd.Wait()
	})
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil {
		t.Fatalf("helper S3 server did not start: %v", err)
	}
	return strings.TrimSpace(line)
}

// clientFor is a client of endpoint (a test's proxy in front of the test
// server) with the test server's credentials and region, which a proxy
// that keeps Host passes on for the server to check.
func clientFor(endpoint string, opts ...func(*s3.Options)) *s3.Client {
	access, secret, region := "test", "test", "us-east-1"
	if os.Getenv(testenv.EnvS3Endpoint) != "" {
		access, secret = os.Getenv(testenv.EnvS3AccessKey), os.Getenv(testenv.EnvS3SecretKey)
		if r := os.Getenv(testenv.EnvS3Region); r != "" {
			region = r
		}
	}
	cfg := aws.Config{Region: region, Credentials: credentials.NewStaticCredentialsProvider(access, secret, "")}
	return s3.NewFromConfig(cfg, append([]func(*s3.Options){func(o *s3.Options) {
		o.BaseEndpoint = aws.String(endpoint)
		o.UsePathStyle = true
		o.RequestChecksumCalculation = aws.RequestChecksumCalculationWhenRequired
		o.ResponseChecksumValidation = aws.ResponseChecksumValidationWhenRequired
	}}, opts...)...)
}

// fastRetries makes the SDK retry attempts times with a 1 ms back-off.
func fastRetries(attempts int) func(*s3.Options) {
	return func(o *s3.Options) {
		o.Retryer = retry.NewStandard(func(so *retry.StandardOptions) {
			so.MaxAttempts = attempts
			so.Backoff = retry.BackoffDelayerFunc(func(int, error) (time.Duration, error) { return time.Millisecond, nil })
		})
	}
}

func newBackend(t *testing.T, client *s3.Client, bucket, prefix string, opts s3store.Options) *s3store.Backend {
	t.Helper()
	b, err := s3store.NewFromClient(client, bucket, prefix, opts)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func rawPut(t *testing.T, client *s3.Client, bucket, key, body string) {
	t.Helper()
	_, err := client.PutObject(t.Context(), &s3.PutObjectInput{Bucket: &bucket, Key: &key, Body: strings.NewReader(body)})
	if err != nil {
		t.Fatal(err)
	}
}

func wantNoUploads(t *testing.T, client *s3.Client, bucket string) {
	t.Helper()
	out, err := client.ListMultipartUploads(t.Context(), &s3.ListMultipartUploadsInput{Bucket: &bucket})
	var ae smithy.APIError
	if errors.As(err, &ae) && ae.ErrorCode() == "NoSuchUpload" {
		return // gofakes3's answer for a bucket that never had an upload
	}
	if err != nil {
		t.Fatal(err)
	}
	if len(out.Uploads) != 0 {
		t.Fatalf("%d multipart uploads left behind, want 0 (first key %q)", len(out.Uploads), aws.ToString(out.Uploads[0].Key))
	}
}

func wantNoObject(t *testing.T, b storage.Backend, path string) {
	t.Helper()
	if _, err := b.Stat(t.Context(), path); !errors.Is(err, storage.ErrNotExist) {
		t.Fatalf("Stat(%q) error = %v, want ErrNotExist", path, err)
	}
}

func sha(data []byte) string { return fmt.Sprintf("sha256:%x", sha256.Sum256(data)) }

// contractVariants are the S3 backends the whole contract suite runs
// against, each on fresh buckets opened with its options.
var contractVariants = []struct {
	name string
	opts s3store.Options
}{
	{"default", s3store.Options{}},
	// Every catalog past its first bytes waits for its commit in a file.
	{"spooled", s3store.Options{CatalogInMemory: 1}},
}

// ifMatchRaces are the contract cases that need If-Match to be atomic
// under a race of writers.
var ifMatchRaces = []string{"ConcurrentWriteIfVersion", "LargeReadModifyWriteRace", "CatalogRace"}

// unkeptRaces asks the probe whether the test server's conditional
// writes hold a race, and returns the skip reason of each contract case
// that needs a guarantee the server does not keep.
func unkeptRaces(t *testing.T, env *testenv.S3) map[string]string {
	t.Helper()
	checks := probe.Backend(t.Context(), env.Backend(t, env.Bucket(t), "probe"), probe.Options{Races: true})
	unkept := map[string]string{}
	for _, c := range checks {
		switch {
		case c.OK:
		case c.Name == "update_race":
			for _, name := range ifMatchRaces {
				unkept[name] = fmt.Sprintf("the S3 server at %s does not keep If-Match atomic under a race (probe: %s)", env.URL, c.Detail)
			}
		case c.Name == "create_race":
			unkept["IntentRace"] = fmt.Sprintf("the S3 server at %s does not keep If-None-Match atomic under a race (probe: %s)", env.URL, c.Detail)
		}
	}
	return unkept
}

// contractNeighbours are keys around the suite's root (dest/root/) that
// must stay invisible to it and untouched by it: objects, and unfinished
// uploads (which Leftovers must not report, nor RemoveLeftovers abort).
var contractNeighbours = []string{"dest/root-sibling", "dest/rootx/y", "dest/x", "other/root/z"}

// TestContract runs the whole storage contract (storagetest.RunAll) on
// every variant, on a prefixed root whose bucket also holds neighbours;
// an interrupted write is a multipart upload left unfinished. The server
// is the in-process one, or the one DISTRIBUTOR_TEST_S3_ENDPOINT names
// (with DISTRIBUTOR_TEST_S3_ACCESS_KEY, _SECRET_KEY and _REGION; see
// testenv.NewS3): the suite then runs against a real S3 endpoint, each
// case in a bucket of its own, removed afterwards.
func TestContract(t *testing.T) {
	t.Parallel()
	env := testenv.NewS3(t)
	unkept := unkeptRaces(t, env)
	for _, v := range contractVariants {
		t.Run(v.name, func(t *testing.T) {
			t.Parallel()
			var buckets sync.Map // storage.Backend → its bucket
			storagetest.RunAll(t, func(t *testing.T) storage.Backend {
				if reason, ok := unkept[path.Base(t.Name())]; ok {
					t.Skip(reason)
				}
				bucket := env.Bucket(t)
				for _, k := range contractNeighbours {
					rawPut(t, env.Client, bucket, k, "neighbour")
					startUpload(t, env.Client, bucket, k, 1000)
				}
				t.Cleanup(func() {
					var outside []string
					for _, k := range openUploads(t, env.Client, bucket) {
						if !strings.HasPrefix(k, "dest/root/") {
							outside = append(outside, k)
						}
					}
					if !slices.Equal(outside, contractNeighbours) {
						t.Errorf("uploads outside the root: %q, want %q kept", outside, contractNeighbours)
					}
					for _, k := range contractNeighbours {
						out, err := env.Client.GetObject(context.Background(), &s3.GetObjectInput{Bucket: &bucket, Key: &k})
						if err != nil {
							t.Errorf("neighbour %s: %v", k, err)
							continue
						}
						body, _ := io.ReadAll(out.Body)
						out.Body.Close()
						if string(body) != "neighbour" {
							t.Errorf("neighbour %s holds %q, want it untouched", k, body)
						}
					}
				})
				b := newBackend(t, env.Client, bucket, "dest/root", v.opts)
				buckets.Store(b, bucket)
				return b
			}, func(t *testing.T, b storage.Backend, p string, size int64) {
				bucket, _ := buckets.Load(b)
				startUpload(t, env.Client, bucket.(string), "dest/root/"+p, size/2)
			})
		})
	}
}

func TestString(t *testing.T) {
	t.Parallel()
	env := testenv.NewS3(t)
	for prefix, want := range map[string]string{"": "s3://bk/", "a/b": "s3://bk/a/b/", "/a/b/": "s3://bk/a/b/"} {
		if got := newBackend(t, env.Client, "bk", prefix, s3store.Options{}).String(); got != want {
			t.Errorf("String() with prefix %q = %q, want %q", prefix, got, want)
		}
	}
}

func TestPrefixRejected(t *testing.T) {
	t.Parallel()
	env := testenv.NewS3(t)
	for _, prefix := range []string{"..", "a/../b", "../a", "a/..", "a//b", "a/./b", `a\b`} {
		_, err := s3store.New(t.Context(), s3store.Options{Bucket: "bk", Prefix: prefix, Endpoint: env.URL})
		if err == nil || !strings.Contains(err.Error(), "invalid s3 key prefix") {
			t.Errorf("New with prefix %q: error = %v, want an invalid prefix error", prefix, err)
		}
		if _, err := s3store.NewFromClient(env.Client, "bk", prefix, s3store.Options{}); err == nil {
			t.Errorf("NewFromClient with prefix %q succeeded", prefix)
		}
	}
}

// TestKeysUnderPrefix checks where the bytes land and what List hides.
func TestKeysUnderPrefix(t *testing.T) {
	t.Parallel()
	env := testenv.NewS3(t)
	bucket := env.Bucket(t)
	b := newBackend(t, env.Client, bucket, "/pub/site/", s3store.Options{})
	if _, err := b.Put(t.Context(), "d/f.txt", strings.NewReader("f"), 1, storage.PutOptions{}); err != nil {
		t.Fatal(err)
	}
	out, err := env.Client.GetObject(t.Context(), &s3.GetObjectInput{Bucket: &bucket, Key: aws.String("pub/site/d/f.txt")})
	if err != nil {
		t.Fatalf("object not at pub/site/d/f.txt: %v", err)
	}
	out.Body.Close()
	// A console folder marker and a key that is no valid path are not objects.
	rawPut(t, env.Client, bucket, "pub/site/d/", "")
	listed := func() string {
		var got []string
		if err := b.List(t.Context(), "", func(oi storage.ObjectInfo) error { got = append(got, oi.Path); return nil }); err != nil {
			t.Fatal(err)
		}
		return fmt.Sprintf("%q", got)
	}
	if got := listed(); got != `["d/f.txt"]` {
		t.Fatalf("List = %s, want [d/f.txt]", got)
	}
	t.Run("empty segment", func(t *testing.T) {
		rawPut(t, env.Client, bucket, "pub/site/a//b", "x")
		if _, err := env.Client.HeadObject(t.Context(), &s3.HeadObjectInput{Bucket: &bucket, Key: aws.String("pub/site/a//b")}); err != nil {
			t.Skipf("the server does not keep a key with an empty segment (pub/site/a//b: %v): a posix-backed server stores it as a/b", err)
		}
		if _, err := env.Client.HeadObject(t.Context(), &s3.HeadObjectInput{Bucket: &bucket, Key: aws.String("pub/site/a/b")}); err == nil {
			t.Skip("the server stores the key pub/site/a//b as pub/site/a/b (a posix-backed server cannot keep an empty path segment)")
		}
		if got := listed(); got != `["d/f.txt"]` {
			t.Fatalf("List = %s, want [d/f.txt]", got)
		}
	})
}

// TestConditionalWriteRace: 8 writers race on create-if-absent and then on
// If-Match, round after round; exactly one wins each time.
func TestConditionalWriteRace(t *testing.T) {
	t.Parallel()
	env := testenv.NewS3(t)
	unkept := unkeptRaces(t, env)
	for _, name := range []string{"IntentRace", "ConcurrentWriteIfVersion"} {
		if reason, ok := unkept[name]; ok {
			t.Skip(reason)
		}
	}
	b := env.Backend(t, env.Bucket(t), "race")
	const writers, rounds = 8, 10
	var want storage.Version
	for round := range rounds {
		var wg sync.WaitGroup
		var wins atomic.Int32
		versions := make([]storage.Version, writers)
		errs := make([]error, writers)
		start := make(chan struct{})
		for i := range writers {
			wg.Go(func() {
				<-start
				versions[i], errs[i] = b.WriteIfVersion(t.Context(), ".distributor.json", fmt.Appendf(nil, "round %d writer %d", round, i), want)
				if errs[i] == nil {
					wins.Add(1)
				}
			})
		}
		close(start)
		wg.Wait()
		if n := wins.Load(); n != 1 {
			t.Fatalf("round %d (want %q): %d winners, want exactly 1; errors %v", round, want, n, errs)
		}
		winner := -1
		for i, err := range errs {
			if err == nil {
				winner = i
			} else if !errors.Is(err, storage.ErrConflict) {
				t.Fatalf("round %d writer %d: %v, want ErrConflict", round, i, err)
			}
		}
		data, v, err := b.ReadVersion(t.Context(), ".distributor.json")
		if err != nil || string(data) != fmt.Sprintf("round %d writer %d", round, winner) || v != versions[winner] {
			t.Fatalf("round %d: ReadVersion = %q, %q, %v; want the winner's", round, data, v, err)
		}
		want = v
	}
}

// TestIfMatchOnMissingIsConflict: gofakes3 answers 412 here, AWS and
// versitygw 404; both mean the object changed under the writer.
func TestIfMatchOnMissingIsConflict(t *testing.T) {
	t.Parallel()
	env := testenv.NewS3(t)
	bucket := env.Bucket(t)
	b := env.Backend(t, bucket, "")
	_, err := env.Client.PutObject(t.Context(), &s3.PutObjectInput{
		Bucket: &bucket, Key: aws.String("x"), Body: strings.NewReader("x"), IfMatch: aws.String(`"0cc175b9c0f1b6a831c399e269772661"`),
	})
	var re interface{ HTTPStatusCode() int }
	if !errors.As(err, &re) || (re.HTTPStatusCode() != 412 && re.HTTPStatusCode() != 404) {
		t.Fatalf("raw If-Match on a missing key: %v, want HTTP 412 or 404", err)
	}
	if _, err := b.WriteIfVersion(t.Context(), "x", []byte("x"), `"0cc175b9c0f1b6a831c399e269772661"`); !errors.Is(err, storage.ErrConflict) {
		t.Fatalf("WriteIfVersion(missing, etag) error = %v, want ErrConflict", err)
	}
	v, err := b.WriteIfVersion(t.Context(), "y", []byte("y"), "")
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Delete(t.Context(), "y"); err != nil {
		t.Fatal(err)
	}
	if _, err := b.WriteIfVersion(t.Context(), "y", []byte("y2"), v); !errors.Is(err, storage.ErrConflict) {
		t.Fatalf("WriteIfVersion(deleted, old etag) error = %v, want ErrConflict", err)
	}
	wantNoObject(t, b, "x")
	wantNoObject(t, b, "y")
}

// TestMetadata: the sha256 and content type reach S3 as object metadata,
// for single-request and multipart writes.
func TestMetadata(t *testing.T) {
	t.Parallel()
	env := testenv.NewS3(t)
	bucket := env.Bucket(t)
	b := newBackend(t, env.Client, bucket, "m", s3store.Options{PartSize: 5 << 20, Concurrency: 2})
	small := []byte("# report\n")
	big := bytes.Repeat([]byte("0123456789abcdef"), (6<<20)/16) // 6 MiB: 2 parts
	for name, data := range map[string][]byte{"small.md": small, "big.bin": big} {
		// Size -1 and a plain reader: the multipart path for big.
		_, err := b.Put(t.Context(), name, io.MultiReader(bytes.NewReader(data)), -1, storage.PutOptions{SHA256: sha(data), ContentType: "text/markdown"})
		if err != nil {
			t.Fatalf("Put %s: %v", name, err)
		}
		oi, err := b.Stat(t.Context(), name)
		if err != nil || oi.SHA256 != sha(data) || oi.Size != int64(len(data)) {
			t.Fatalf("Stat %s = %+v, %v; want sha256 %s, size %d", name, oi, err, sha(data), len(data))
		}
		head, err := env.Client.HeadObject(t.Context(), &s3.HeadObjectInput{Bucket: &bucket, Key: aws.String("m/" + name)})
		if err != nil {
			t.Fatal(err)
		}
		if got := head.Metadata["sha256"]; got != sha(data) {
			t.Errorf("%s: x-amz-meta-sha256 = %q (metadata %v), want %q", name, got, head.Metadata, sha(data))
		}
		if got := aws.ToString(head.ContentType); got != "text/markdown" {
			t.Errorf("%s: Content-Type = %q, want text/markdown", name, got)
		}
	}
	// WriteIfVersion records the digest too.
	if _, err := b.WriteIfVersion(t.Context(), "c.json", []byte("{}"), ""); err != nil {
		t.Fatal(err)
	}
	if oi, err := b.Stat(t.Context(), "c.json"); err != nil || oi.SHA256 != sha([]byte("{}")) {
		t.Fatalf("Stat c.json = %+v, %v; want sha256 %s", oi, err, sha([]byte("{}")))
	}
}

// TestPutChecksContent: bytes that do not match the announced size or
// sha256 never become an object, on either upload path.
func TestPutChecksContent(t *testing.T) {
	t.Parallel()
	env := testenv.NewS3(t)
	bucket := env.Bucket(t)
	b := newBackend(t, env.Client, bucket, "", s3store.Options{PartSize: 5 << 20, Concurrency: 2})
	for _, n := range []int{1000, 6 << 20} {
		data := bytes.Repeat([]byte{'d'}, n)
		cases := []struct {
			name, want string
			size       int64
			opts       storage.PutOptions
		}{
			{"short", "announced", int64(n) + 1, storage.PutOptions{}},
			{"long", "more than", int64(n) - 1, storage.PutOptions{}},
			{"digest", "does not match", int64(n), storage.PutOptions{SHA256: sha([]byte("other"))}},
			{"digest-unknown-size", "does not match", -1, storage.PutOptions{SHA256: sha([]byte("other"))}},
			{"bad-digest", "invalid sha256", int64(n), storage.PutOptions{SHA256: "md5:abc"}},
			// Catalogs hold lowercase hex only: metadata they would refuse is not written.
			{"upper-case-digest", "invalid sha256", int64(n), storage.PutOptions{SHA256: strings.ToUpper(sha(data))}},
			{"upper-case-hex-digest", "invalid sha256", int64(n), storage.PutOptions{SHA256: "sha256:" + strings.ToUpper(strings.TrimPrefix(sha(data), "sha256:"))}},
		}
		for _, c := range cases {
			path := fmt.Sprintf("%d/%s", n, c.name)
			_, err := b.Put(t.Context(), path, io.MultiReader(bytes.NewReader(data)), c.size, c.opts)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("Put %s: error = %v, want one containing %q", path, err, c.want)
			}
			wantNoObject(t, b, path)
		}
	}
	wantNoUploads(t, env.Client, bucket)
}

// TestMultipartFailureLeavesNothing: a reader failing or a context
// cancelled in the middle of a multipart upload leaves the old object (or
// none) and no unfinished upload.
func TestMultipartFailureLeavesNothing(t *testing.T) {
	t.Parallel()
	env := testenv.NewS3(t)
	bucket := env.Bucket(t)
	b := newBackend(t, env.Client, bucket, "", s3store.Options{PartSize: 5 << 20, Concurrency: 2})
	if _, err := b.Put(t.Context(), "old", strings.NewReader("old"), 3, storage.PutOptions{}); err != nil {
		t.Fatal(err)
	}
	const size = 16 << 20
	for _, path := range []string{"old", "new"} {
		t.Run("FailingReader/"+path, func(t *testing.T) {
			errSource := errors.New("source broke")
			r := &genReader{left: size, failAt: 12 << 20, failErr: errSource}
			_, err := b.Put(t.Context(), path, r, size, storage.PutOptions{})
			if !errors.Is(err, errSource) {
				t.Fatalf("Put error = %v, want the reader's error", err)
			}
		})
		t.Run("Cancelled/"+path, func(t *testing.T) {
			ctx, cancel := context.WithCancel(t.Context())
			defer cancel()
			r := &genReader{left: size, cancelAt: 7 << 20, cancel: cancel}
			start := time.Now()
			_, err := b.Put(ctx, path, r, -1, storage.PutOptions{})
			if !errors.Is(err, context.Canceled) {
				t.Fatalf("Put error = %v, want context.Canceled", err)
			}
			if r.read > 12<<20 {
				t.Errorf("Put read %d bytes after the cancel at 7 MiB, want it to stop within a part", r.read)
			}
			t.Logf("cancelled Put returned in %v", time.Since(start))
		})
	}
	data, _, err := b.ReadVersion(t.Context(), "old")
	if err != nil || string(data) != "old" {
		t.Fatalf("old object = %q, %v; want it untouched", data, err)
	}
	wantNoObject(t, b, "new")
	wantNoUploads(t, env.Client, bucket)
}

// genReader yields left bytes of a pattern without allocating; it can fail
// or cancel a context once a byte count is reached.
type genReader struct {
	left, read int64
	failAt     int64
	failErr    error
	cancelAt   int64
	cancel     context.CancelFunc
}

func (g *genReader) Read(p []byte) (int, error) {
	if g.failErr != nil && g.read >= g.failAt {
		return 0, g.failErr
	}
	if g.cancel != nil && g.read >= g.cancelAt {
		g.cancel()
	}
	if g.left == 0 {
		return 0, io.EOF
	}
	n := int(min(int64(len(p)), g.left, 64<<10))
	for i := range p[:n] {
		p[i] = byte(g.read + int64(i))
	}
	g.left -= int64(n)
	g.read += int64(n)
	return n, nil
}

// TestMultipartMemoryBounded uploads 64 MiB from a plain reader to a server
// in another process and measures this process's heap: the upload must
// hold a few parts, never the object.
func TestMultipartMemoryBounded(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector changes allocation and slows the server: run without -race")
	}
	var client *s3.Client
	var bucket string
	if os.Getenv(testenv.EnvS3Endpoint) != "" {
		env := testenv.NewS3(t)
		client, bucket = env.Client, env.Bucket(t)
	} else {
		client = clientFor(startHelperServer(t))
		bucket = "mem"
		if _, err := client.CreateBucket(t.Context(), &s3.CreateBucketInput{Bucket: &bucket}); err != nil {
			t.Fatal(err)
		}
	}
	const size, partSize, concurrency = 64 << 20, 5 << 20, 2
	b := newBackend(t, client, bucket, "", s3store.Options{PartSize: partSize, Concurrency: concurrency})
	src := func() io.Reader { return io.LimitReader(rand.NewChaCha8([32]byte{7}), size) }
	h := sha256.New()
	io.Copy(h, src())
	digest := fmt.Sprintf("sha256:%x", h.Sum(nil))

	// A tighter GC target keeps garbage from blurring the peak.
	defer debug.SetGCPercent(debug.SetGCPercent(25))
	peak, total, err := measureHeap(func() error {
		_, err := b.Put(t.Context(), "big.bin", src(), size, storage.PutOptions{SHA256: digest})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("64 MiB multipart Put (part %d MiB, concurrency %d): peak heap in use +%.1f MiB, allocated %.1f MiB",
		partSize>>20, concurrency, float64(peak)/(1<<20), float64(total)/(1<<20))
	// The transfer manager's pool holds concurrency+1 parts; it reads the
	// first part apart, before the pool exists. An
	// unbounded upload would allocate the whole 64 MiB at least.
	const bound = (concurrency+3)*partSize + 8<<20
	if total > bound {
		t.Errorf("Put allocated %d MiB for a 64 MiB object, want at most %d MiB", total>>20, bound>>20)
	}
	if peak > bound {
		t.Errorf("peak heap grew by %d MiB for a 64 MiB object, want at most %d MiB", peak>>20, bound>>20)
	}
	if oi, err := b.Stat(t.Context(), "big.bin"); err != nil || oi.Size != size || oi.SHA256 != digest {
		t.Fatalf("Stat = %+v, %v; want size %d sha256 %s", oi, err, size, digest)
	}
}

// TestConcurrentPutsShareTheMemoryBudget: concurrent Puts on one Backend
// (the engine's workers) buffer within Options.MemoryBudget together, large
// multipart uploads and single-request objects alike; each would otherwise
// hold its own parts or its whole object.
func TestConcurrentPutsShareTheMemoryBudget(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector changes allocation and slows the server: run without -race")
	}
	client := clientFor(startHelperServer(t))
	bucket := "budget"
	if _, err := client.CreateBucket(t.Context(), &s3.CreateBucketInput{Bucket: &bucket}); err != nil {
		t.Fatal(err)
	}
	const partSize, budget = 5 << 20, 32 << 20
	for _, c := range []struct {
		name          string
		objects, size int64
	}{
		{"multipart", 4, 24 << 20},
		{"single request", 16, 4 << 20},
	} {
		t.Run(c.name, func(t *testing.T) {
			b := newBackend(t, client, bucket, "", s3store.Options{PartSize: partSize, MemoryBudget: budget})
			src := func(i int64) io.Reader { return io.LimitReader(rand.NewChaCha8([32]byte{byte(i)}), c.size) }
			defer debug.SetGCPercent(debug.SetGCPercent(25))
			peak, _, err := measureHeap(func() error {
				var wg sync.WaitGroup
				errs := make([]error, c.objects)
				for i := range c.objects {
					wg.Go(func() {
						_, errs[i] = b.Put(t.Context(), fmt.Sprintf("o%d", i), src(i), c.size, storage.PutOptions{})
					})
				}
				wg.Wait()
				return errors.Join(errs...)
			})
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("%d concurrent Puts of %d MiB: peak heap in use +%.1f MiB (budget %d MiB)", c.objects, c.size>>20, float64(peak)/(1<<20), budget>>20)
			// Slack for the HTTP clients and for garbage: released buffers
			// stay in use until the GC (target 25 %) collects them.
			const bound = budget*5/4 + 8<<20
			if peak > bound {
				t.Errorf("peak heap grew by %d MiB, want at most %d MiB", peak>>20, bound>>20)
			}
			for i := range c.objects {
				if oi, err := b.Stat(t.Context(), fmt.Sprintf("o%d", i)); err != nil || oi.Size != c.size {
					t.Errorf("Stat o%d = %+v, %v; want size %d", i, oi, err, c.size)
				}
			}
		})
	}
}

// TestBackendsGivenOneBudgetShareIt: Puts on many Backends that share one
// Budget (a process's destinations, stores.Opener) buffer within it
// together: 16 roots each uploading a 4 MiB object at once hold at most the
// one 32 MiB budget, where a budget per Backend would allow 64 MiB.
func TestBackendsGivenOneBudgetShareIt(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector changes allocation and slows the server: run without -race")
	}
	client := clientFor(startHelperServer(t))
	bucket := "shared"
	if _, err := client.CreateBucket(t.Context(), &s3.CreateBucketInput{Bucket: &bucket}); err != nil {
		t.Fatal(err)
	}
	const roots, size, budget = 16, 4 << 20, 32 << 20
	shared := s3store.NewBudget(budget)
	backends := make([]*s3store.Backend, roots)
	for i := range backends {
		backends[i] = newBackend(t, client, bucket, fmt.Sprintf("r%d/", i), s3store.Options{PartSize: 5 << 20, Budget: shared})
	}
	defer debug.SetGCPercent(debug.SetGCPercent(25))
	peak, _, err := measureHeap(func() error {
		var wg sync.WaitGroup
		errs := make([]error, roots)
		for i, b := range backends {
			wg.Go(func() {
				src := io.LimitReader(rand.NewChaCha8([32]byte{byte(i)}), size)
				_, errs[i] = b.Put(t.Context(), "o", src, size, storage.PutOptions{})
			})
		}
		wg.Wait()
		return errors.Join(errs...)
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%d roots: budget peak %.1f MiB, heap peak +%.1f MiB (budget %d MiB)", roots, float64(shared.Peak())/(1<<20), float64(peak)/(1<<20), budget>>20)
	if p := shared.Peak(); p > budget || p < size {
		t.Errorf("budget peak = %d bytes, want between %d and %d", p, size, budget)
	}
	if bound := int64(budget*5/4 + 8<<20); int64(peak) > bound {
		t.Errorf("peak heap grew by %d MiB, want at most %d MiB", peak>>20, bound>>20)
	}
	for i, b := range backends {
		if oi, err := b.Stat(t.Context(), "o"); err != nil || oi.Size != size {
			t.Errorf("root %d: Stat = %+v, %v; want size %d", i, oi, err, size)
		}
	}
}

func TestMemoryBudgetBelowFourParts(t *testing.T) {
	t.Parallel()
	env := testenv.NewS3(t)
	_, err := s3store.NewFromClient(env.Client, "b", "", s3store.Options{PartSize: 8 << 20, MemoryBudget: 31 << 20})
	if err == nil || !strings.Contains(err.Error(), "s3 memory budget 32505856 bytes is below 4 parts of 8388608 bytes: raise the budget or lower the part size") {
		t.Fatalf("err = %v, want the budget named with the fix", err)
	}
}

// measureHeap runs fn while sampling the heap; it returns the peak growth
// of HeapInuse and the bytes allocated meanwhile.
func measureHeap(fn func() error) (peak, total uint64, err error) {
	runtime.GC()
	var base runtime.MemStats
	runtime.ReadMemStats(&base)
	done := make(chan struct{})
	var wg sync.WaitGroup
	var maxInuse atomic.Uint64
	wg.Go(func() {
		tick := time.NewTicker(2 * time.Millisecond)
		defer tick.Stop()
		var ms runtime.MemStats
		for {
			runtime.ReadMemStats(&ms)
			if ms.HeapInuse > maxInuse.Load() {
				maxInuse.Store(ms.HeapInuse)
			}
			select {
			case <-done:
				return
			case <-tick.C:
			}
		}
	})
	err = fn()
	close(done)
	wg.Wait()
	var end runtime.MemStats
	runtime.ReadMemStats(&end)
	if m := maxInuse.Load(); m > base.HeapInuse {
		peak = m - base.HeapInuse
	}
	return peak, end.TotalAlloc - base.TotalAlloc, err
}

// TestMissingBucket: every operation names the bucket; nothing reads as
// "object missing".
func TestMissingBucket(t *testing.T) {
	t.Parallel()
	env := testenv.NewS3(t)
	b := newBackend(t, env.Client, "no-such-bucket-here", "p", s3store.Options{})
	err := b.CheckBucket(t.Context())
	if err == nil || !strings.Contains(err.Error(), `s3 bucket "no-such-bucket-here" does not exist (or no access)`) || !errors.Is(err, s3store.ErrNoBucket) {
		t.Fatalf("CheckBucket error = %v, want the missing-bucket message", err)
	}
	ctx := t.Context()
	ops := map[string]func() error{
		"Stat": func() error { _, err := b.Stat(ctx, "x"); return err },
		"Open": func() error { _, err := b.Open(ctx, "x"); return err },
		"Put":  func() error { _, err := b.Put(ctx, "x", strings.NewReader("x"), 1, storage.PutOptions{}); return err },
		"List": func() error { return b.List(ctx, "", func(storage.ObjectInfo) error { return nil }) },
		"ReadVersion": func() error {
			_, _, err := b.ReadVersion(ctx, "x")
			if err == nil {
				return errors.New("ReadVersion said: missing object")
			}
			return err
		},
		"WriteIfVersion":  func() error { _, err := b.WriteIfVersion(ctx, "x", []byte("x"), ""); return err },
		"DeleteIfVersion": func() error { return b.DeleteIfVersion(ctx, "x", "") },
	}
	for name, op := range ops {
		err := op()
		if !errors.Is(err, s3store.ErrNoBucket) || errors.Is(err, storage.ErrNotExist) || !strings.Contains(err.Error(), `"no-such-bucket-here"`) {
			t.Errorf("%s error = %v, want the missing-bucket error", name, err)
		}
	}
}

// TestEndpointDown: a closed port is ErrUnavailable, quickly.
func TestEndpointDown(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	endpoint := "http://" + ln.Addr().String()
	ln.Close()
	b := newBackend(t, clientFor(endpoint, fastRetries(2)), "bk", "", s3store.Options{})
	start := time.Now()
	_, err = b.Stat(t.Context(), "x")
	if !errors.Is(err, storage.ErrUnavailable) || errors.Is(err, storage.ErrNotExist) {
		t.Fatalf("Stat error = %v, want ErrUnavailable", err)
	}
	if _, err := b.Put(t.Context(), "x", strings.NewReader("x"), 1, storage.PutOptions{}); !errors.Is(err, storage.ErrUnavailable) {
		t.Fatalf("Put error = %v, want ErrUnavailable", err)
	}
	if _, err := b.WriteIfVersion(t.Context(), "x", []byte("x"), ""); !errors.Is(err, storage.ErrUnavailable) {
		t.Fatalf("WriteIfVersion error = %v, want ErrUnavailable", err)
	}
	err = b.CheckBucket(t.Context())
	if !errors.Is(err, storage.ErrUnavailable) || !strings.Contains(err.Error(), "cannot reach S3 endpoint "+endpoint) {
		t.Fatalf("CheckBucket error = %v, want \"cannot reach S3 endpoint %s\"", err, endpoint)
	}
	if d := time.Since(start); d > 3*time.Second {
		t.Fatalf("four calls to a closed port took %v, want well under 3 s", d)
	}
	t.Logf("error: %v", err)
}

// slowDownServer answers 503 SlowDown to the first n requests and proxies
// the rest to target.
func slowDownServer(t *testing.T, target string, n int32) (endpoint string, slowed *atomic.Int32) {
	t.Helper()
	dst, err := url.Parse(target)
	if err != nil {
		t.Fatal(err)
	}
	slowed = new(atomic.Int32)
	var left atomic.Int32
	left.Store(n)
	proxy := &httputil.ReverseProxy{Rewrite: func(r *httputil.ProxyRequest) {
		r.SetURL(dst)
		r.Out.Host = r.In.Host // the SigV4 signature covers Host
	}}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if left.Add(-1) >= 0 {
			slowed.Add(1)
			io.Copy(io.Discard, r.Body)
			w.Header().Set("Content-Type", "application/xml")
			w.WriteHeader(http.StatusServiceUnavailable)
			io.WriteString(w, `<?xml version="1.0" encoding="UTF-8"?><Error><Code>SlowDown</Code><Message>Please reduce your request rate.</Message></Error>`)
			return
		}
		proxy.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	return srv.URL, slowed
}

func TestSlowDownIsRetried(t *testing.T) {
	t.Parallel()
	env := testenv.NewS3(t)
	bucket := env.Bucket(t)

	endpoint, slowed := slowDownServer(t, env.URL, 3)
	b := newBackend(t, clientFor(endpoint, fastRetries(4)), bucket, "", s3store.Options{})
	if _, err := b.Put(t.Context(), "x", strings.NewReader("xyz"), 3, storage.PutOptions{}); err != nil {
		t.Fatalf("Put through 3 SlowDowns with 4 attempts: %v", err)
	}
	if n := slowed.Load(); n != 3 {
		t.Fatalf("server slowed %d requests, want 3", n)
	}
	if oi, err := b.Stat(t.Context(), "x"); err != nil || oi.Size != 3 {
		t.Fatalf("Stat = %+v, %v", oi, err)
	}

	endpoint, slowed = slowDownServer(t, env.URL, 1000)
	b = newBackend(t, clientFor(endpoint, fastRetries(3)), bucket, "", s3store.Options{})
	_, err := b.Put(t.Context(), "y", strings.NewReader("y"), 1, storage.PutOptions{})
	if !errors.Is(err, storage.ErrUnavailable) {
		t.Fatalf("Put against a server that always says SlowDown: %v, want ErrUnavailable", err)
	}
	if n := slowed.Load(); n != 3 {
		t.Fatalf("server saw %d attempts, want 3", n)
	}
	wantNoObject(t, env.Backend(t, bucket, ""), "y")
}

// TestNewFromDefaultChain builds the backend the production way: standard
// credential chain, AWS_CA_BUNDLE set, custom endpoint.
func TestNewFromDefaultChain(t *testing.T) {
	env := testenv.NewS3(t)
	bucket := env.Bucket(t)
	env.UseStandardChain(t)
	b, err := s3store.New(t.Context(), s3store.Options{Bucket: bucket, Prefix: "p/", Endpoint: env.URL, Region: os.Getenv(testenv.EnvS3Region)})
	if err != nil {
		t.Fatal(err)
	}
	if err := b.CheckBucket(t.Context()); err != nil {
		t.Fatal(err)
	}
	data := bytes.Repeat([]byte("body "), 1000)
	if _, err := b.Put(t.Context(), "f", bytes.NewReader(data), int64(len(data)), storage.PutOptions{}); err != nil {
		t.Fatal(err)
	}
	// The raw bytes, not aws-chunked framing.
	out, err := env.Client.GetObject(t.Context(), &s3.GetObjectInput{Bucket: &bucket, Key: aws.String("p/f")})
	if err != nil {
		t.Fatal(err)
	}
	got, _ := io.ReadAll(out.Body)
	out.Body.Close()
	if !bytes.Equal(got, data) {
		t.Fatalf("stored %d bytes (%q...), want the %d bytes put", len(got), got[:min(len(got), 40)], len(data))
	}

	if _, err := s3store.New(t.Context(), s3store.Options{Bucket: bucket, Endpoint: "localhost:9000"}); err == nil || !strings.Contains(err.Error(), "invalid s3 endpoint") {
		t.Fatalf("New with endpoint without scheme: %v, want an invalid endpoint error", err)
	}
}

// TestFrozenServerTimesOut: a server that accepts connections but answers
// nothing (stopped with SIGSTOP) fails each call within the configured
// timeouts, as ErrUnavailable naming the limit; once it runs again, the
// next call succeeds.
func TestFrozenServerTimesOut(t *testing.T) {
	env := testenv.NewS3(t)
	bucket := env.Bucket(t)
	proxy := testenv.NewFreezableProxy(t, env.URL)
	env.UseStandardChain(t)
	const limit = 300 * time.Millisecond
	b, err := s3store.New(t.Context(), s3store.Options{
		Bucket: bucket, Prefix: "p/", Endpoint: proxy.URL, Region: os.Getenv(testenv.EnvS3Region),
		Timeouts:    s3store.Timeouts{Connect: limit, FirstByte: limit, Idle: limit},
		MaxAttempts: 2, MaxBackoff: 10 * time.Millisecond,
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	big := bytes.Repeat([]byte("0123456789abcdef"), 1<<20) // 16 MiB
	// Seeded with the test client: under load, 300 ms is too short for the
	// server to assemble a multipart upload.
	if _, err := env.Client.PutObject(ctx, &s3.PutObjectInput{Bucket: &bucket, Key: aws.String("p/big"), Body: bytes.NewReader(big)}); err != nil {
		t.Fatal(err)
	}
	download, err := b.Open(ctx, "big")
	if err != nil {
		t.Fatal(err)
	}
	defer download.Close()
	if _, err := io.ReadFull(download, make([]byte, 1024)); err != nil {
		t.Fatal(err)
	}

	proxy.Freeze()
	endpoint := "S3 endpoint " + proxy.URL
	// Two attempts, each bounded by one limit, plus back-off and slack.
	const bound = 2*limit + 3*time.Second // generous: CI machines may be loaded; a hang is minutes
	var wg sync.WaitGroup
	for _, c := range []struct {
		name, want string
		op         func() error
	}{
		{"Stat", "did not answer within 300ms (first byte)", func() error { _, err := b.Stat(ctx, "big"); return err }},
		{"List", "did not answer within 300ms (first byte)", func() error {
			return b.List(ctx, "", func(storage.ObjectInfo) error { return nil })
		}},
		{"Put", "did not answer within 300ms (first byte)", func() error {
			_, err := b.Put(ctx, "small", strings.NewReader("small"), 5, storage.PutOptions{})
			return err
		}},
		{"WriteIfVersion", "did not answer within 300ms (first byte)", func() error {
			_, err := b.WriteIfVersion(ctx, "lock", []byte("x"), "")
			return err
		}},
		// 6 MiB in one PutObject, whose body the server never takes.
		{"Put large", "took no request bytes for 300ms (idle)", func() error {
			_, err := b.Put(ctx, "large", bytes.NewReader(big[:6<<20]), 6<<20, storage.PutOptions{})
			return err
		}},
		// 12 MiB streamed as one PutObject (its sha256 known).
		{"Put streamed", "took no request bytes for 300ms (idle)", func() error {
			_, err := b.Put(ctx, "streamed", bytes.NewReader(big[:12<<20]), 12<<20, storage.PutOptions{SHA256: sha(big[:12<<20]), SourceVerified: true})
			return err
		}},
		// The rest of the download stops coming.
		{"Open read", "sent no response bytes for 300ms (idle)", func() error {
			_, err := io.Copy(io.Discard, download)
			return err
		}},
	} {
		// The calls are independent: their timeouts run at once.
		wg.Go(func() {
			start := time.Now()
			err := c.op()
			took := time.Since(start)
			if !errors.Is(err, storage.ErrUnavailable) || !strings.Contains(err.Error(), endpoint+" "+c.want) {
				t.Errorf("%s against a frozen server: %v, want ErrUnavailable with %q", c.name, err, endpoint+" "+c.want)
			}
			if took > bound+limit { // the download first drains what the kernel buffered
				t.Errorf("%s against a frozen server took %v, want under %v", c.name, took, bound+limit)
			}
			t.Logf("%s: %v after %v", c.name, err, took.Round(time.Millisecond))
		})
	}
	wg.Wait()

	proxy.Unfreeze()
	if oi, err := b.Stat(ctx, "big"); err != nil || oi.Size != int64(len(big)) {
		t.Fatalf("Stat after the server resumed: %+v, %v", oi, err)
	}
	if _, err := b.Put(ctx, "after", strings.NewReader("after"), 5, storage.PutOptions{}); err != nil {
		t.Fatalf("Put after the server resumed: %v", err)
	}
}

// TestTricklingServerFailsBelowMinRate: a server that sends its answers a
// byte at a time, never idle for the idle limit, fails a download once
// it falls below the minimum rate, as ErrUnavailable naming min_rate, and
// OnLimit hears of it as it happens.
func TestTricklingServerFailsBelowMinRate(t *testing.T) {
	env := testenv.NewS3(t)
	bucket := env.Bucket(t)
	proxy := testenv.NewFreezableProxy(t, env.URL)
	env.UseStandardChain(t)
	const idle = 500 * time.Millisecond
	var mu sync.Mutex
	var told []string
	b, err := s3store.New(t.Context(), s3store.Options{
		Bucket: bucket, Prefix: "p/", Endpoint: proxy.URL, Region: os.Getenv(testenv.EnvS3Region),
		Timeouts: s3store.Timeouts{Idle: idle, MinRate: 1000, OnLimit: func(_ context.Context, err error) {
			mu.Lock()
			defer mu.Unlock()
			told = append(told, err.Error())
		}},
		MaxAttempts: 1,
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	big := bytes.Repeat([]byte("0123456789abcdef"), 1<<20) // 16 MiB
	if _, err := env.Client.PutObject(ctx, &s3.PutObjectInput{Bucket: &bucket, Key: aws.String("p/big"), Body: bytes.NewReader(big)}); err != nil {
		t.Fatal(err)
	}
	download, err := b.Open(ctx, "big")
	if err != nil {
		t.Fatal(err)
	}
	defer download.Close()
	if _, err := io.ReadFull(download, make([]byte, 1024)); err != nil {
		t.Fatal(err)
	}
	// 20 bytes a second, each within the idle limit.
	proxy.Trickle(50 * time.Millisecond)
	done := make(chan error, 1)
	start := time.Now()
	go func() {
		_, err := io.Copy(io.Discard, download)
		done <- err
	}()
	select {
	case err = <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("a download trickling at 20 bytes/s still runs after 30s: the minimum rate does not cut it")
	}
	t.Logf("%v after %v", err, time.Since(start).Round(time.Millisecond))
	const want = "response bytes in"
	if !errors.Is(err, storage.ErrUnavailable) || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), "below 1000 bytes/s (min_rate)") {
		t.Fatalf("trickling download: %v, want ErrUnavailable naming min_rate", err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(told) != 1 || !strings.Contains(told[0], "GET "+proxy.URL+"/"+bucket+"/p/big sent ") || !strings.Contains(told[0], "(min_rate)") {
		t.Errorf("OnLimit was told %q, want the slow download once", told)
	}
}
