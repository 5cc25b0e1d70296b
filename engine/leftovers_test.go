package engine_test

import (
	"bytes"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/distributor/distributor/catalog"
	"github.com/distributor/distributor/config"
	"github.com/distributor/distributor/engine"
	"github.com/distributor/distributor/lease"
	"github.com/distributor/distributor/planner"
	"github.com/distributor/distributor/storage"
	"github.com/distributor/distributor/storage/local"
	"github.com/distributor/distributor/testenv"
)

// plantTemp leaves a 100-byte temp file at rel in root, last written at
// mtime: what a write killed half-way leaves.
func plantTemp(t *testing.T, root, rel string, mtime time.Time) {
	t.Helper()
	p := filepath.Join(root, filepath.FromSlash(rel))
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, make([]byte, 100), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Chtimes(p, mtime, mtime); err != nil {
		t.Fatal(err)
	}
}

// tempFiles lists every temp-named file in root, distributor's own folder
// included.
func tempFiles(t *testing.T, root string) []string {
	t.Helper()
	var out []string
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() && catalog.IsTempName(d.Name()) {
			rel, _ := filepath.Rel(root, p)
			out = append(out, filepath.ToSlash(rel))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// crashAfterIntent runs a publication of files that dies right after
// writing its intent, before any output.
func crashAfterIntent(t *testing.T, root storage.Backend, files map[string]string) {
	t.Helper()
	if _, err := publish(t, &dyingBackend{Backend: root, afterIntent: true}, planner.Replacement, files, fixedNow); err == nil {
		t.Fatal("the crashing publication succeeded")
	}
	if data, _, err := engine.ReadIntent(t.Context(), root); err != nil || data == nil {
		t.Fatalf("no intent after the crash: %v", err)
	}
}

// After a crash, the next publication's recovery removes the temp files
// older than LeftoverAge anywhere in the root, and keeps younger ones (a
// write that may still be in flight). A publication that recovers nothing
// does not look for them (no walk of the root).
func TestRecoveryRemovesOldTempFilesOnly(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	lb, _ := local.New(root)
	v1 := map[string]string{"data/a.csv": "a\n", "report.md": "# Today\n"}
	if _, err := publish(t, lb, planner.Replacement, v1, fixedNow.Add(-2*time.Minute)); err != nil {
		t.Fatal(err)
	}
	old := time.Now().Add(-engine.DefaultLeftoverAge - time.Minute)
	plantTemp(t, root, "data/"+catalog.TempPrefix+"BEFORE", old)
	if _, err := publish(t, lb, planner.Replacement, map[string]string{"data/a.csv": "a2\n", "report.md": "# Today\n"}, fixedNow.Add(-time.Minute)); err != nil {
		t.Fatal(err)
	}
	if got, want := tempFiles(t, root), []string{"data/" + catalog.TempPrefix + "BEFORE"}; !slices.Equal(got, want) {
		t.Fatalf("after a publication that recovered nothing: temp files %q, want %q kept", got, want)
	}

	v3 := map[string]string{"data/a.csv": "a3\n", "data/b.csv": "b\n", "report.md": "# Tomorrow\n"}
	crashAfterIntent(t, lb, v3)
	plantTemp(t, root, "data/deep/"+catalog.TempPrefix+"OLD", old)
	plantTemp(t, root, "data/"+catalog.TempPrefix+"YOUNG", time.Now().Add(-engine.DefaultLeftoverAge+time.Minute))
	res, err := publish(t, lb, planner.Replacement, v3, fixedNow)
	if err != nil {
		t.Fatal(err)
	}
	if !res.Recovered {
		t.Fatal("the retry recovered nothing; the test needs an interrupted run")
	}
	if got, want := tempFiles(t, root), []string{"data/" + catalog.TempPrefix + "YOUNG"}; !slices.Equal(got, want) {
		t.Fatalf("after recovery: temp files %q, want only %q (younger than %v)", got, want, engine.DefaultLeftoverAge)
	}
	if _, err := os.Stat(filepath.Join(root, "data/deep")); !os.IsNotExist(err) {
		t.Errorf("data/deep: the folder emptied by the clean-up is still there (%v)", err)
	}
}

// LeftoverAge sets the threshold.
func TestLeftoverAgeIsConfigurable(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	lb, _ := local.New(root)
	plantTemp(t, root, "x/"+catalog.TempPrefix+"A", time.Now().Add(-10*time.Minute))
	for _, tc := range []struct {
		age  time.Duration
		want int
	}{{0, 0}, {time.Hour, 0}, {5 * time.Minute, 1}} {
		rep, err := (&engine.Engine{LeftoverAge: tc.age}).Leftovers(t.Context(), lb)
		if err != nil {
			t.Fatal(err)
		}
		if rep.Count != tc.want {
			t.Errorf("LeftoverAge %v: %d leftovers, want %d", tc.age, rep.Count, tc.want)
		}
	}
}

// On S3 the leftovers are unfinished multipart uploads under the root's
// prefix: recovery aborts those old enough, never one outside the prefix.
func TestRecoveryAbortsUnfinishedUploads(t *testing.T) {
	t.Parallel()
	srv := testenv.NewS3(t)
	bucket := srv.Bucket(t)
	root := srv.Backend(t, bucket, s3Prefix)
	ctx := t.Context()
	start := func(key string) {
		up, err := srv.Client.CreateMultipartUpload(ctx, &s3.CreateMultipartUploadInput{Bucket: &bucket, Key: aws.String(key)})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := srv.Client.UploadPart(ctx, &s3.UploadPartInput{Bucket: &bucket, Key: aws.String(key), UploadId: up.UploadId,
			PartNumber: aws.Int32(1), Body: bytes.NewReader(make([]byte, 1<<20)), ContentLength: aws.Int64(1 << 20)}); err != nil {
			t.Fatal(err)
		}
	}
	uploads := func() []string {
		out, err := srv.Client.ListMultipartUploads(ctx, &s3.ListMultipartUploadsInput{Bucket: &bucket})
		if err != nil {
			t.Fatal(err)
		}
		var keys []string
		for _, u := range out.Uploads {
			keys = append(keys, aws.ToString(u.Key))
		}
		slices.Sort(keys)
		return keys
	}
	files := map[string]string{"data/a.csv": "a\n"}
	crashAfterIntent(t, root, files)
	start(s3Prefix + "data/big.bin")
	start("elsewhere/big.bin")

	// Just started: it may be a write in flight.
	rep, err := (&engine.Engine{}).Leftovers(ctx, root)
	if err != nil || rep.Count != 0 {
		t.Fatalf("Leftovers with the default age = %+v, %v; want none (the upload is seconds old)", rep, err)
	}
	e := &engine.Engine{Now: func() time.Time { return fixedNow }, LeftoverAge: time.Nanosecond}
	rep, err = e.Leftovers(ctx, root)
	if err != nil || rep.Count != 1 || rep.Bytes != 1<<20 || !slices.Equal(rep.Paths, []string{"data/big.bin"}) {
		t.Fatalf("Leftovers = %+v, %v; want the one upload of 1 MiB under the prefix", rep, err)
	}
	if found, err := e.Recover(ctx, root, heldLease{}); err != nil || !found {
		t.Fatalf("Recover = %v, %v; want the interrupted run recovered", found, err)
	}
	if got, want := uploads(), []string{"elsewhere/big.bin"}; !slices.Equal(got, want) {
		t.Fatalf("unfinished uploads after recovery: %q, want only %q (outside the root)", got, want)
	}
}

// leaveLeftover leaves what a write of 1 MiB to rel killed half-way leaves:
// a temp file beside it (local, last written two hours ago) or an
// unfinished upload to it (S3, started now).
func leaveLeftover(t *testing.T, root storage.Backend, base config.Destination, rel string) {
	t.Helper()
	if base.Backend == config.BackendLocal {
		p := filepath.Join(base.Path, filepath.FromSlash(path.Dir(rel)), catalog.TempPrefix+"KILLED")
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, make([]byte, 1<<19), 0o644); err != nil {
			t.Fatal(err)
		}
		old := time.Now().Add(-2 * time.Hour)
		if err := os.Chtimes(p, old, old); err != nil {
			t.Fatal(err)
		}
		return
	}
	access, secret := "test", "test" // the in-process server's, unless an external one is used
	if os.Getenv(testenv.EnvS3Endpoint) != "" {
		access, secret = os.Getenv(testenv.EnvS3AccessKey), os.Getenv(testenv.EnvS3SecretKey)
	}
	client := s3.NewFromConfig(aws.Config{Region: base.Region, Credentials: credentials.NewStaticCredentialsProvider(access, secret, "")}, func(o *s3.Options) {
		o.BaseEndpoint, o.UsePathStyle = aws.String(base.Endpoint), true
	})
	key := base.Path + rel
	up, err := client.CreateMultipartUpload(t.Context(), &s3.CreateMultipartUploadInput{Bucket: &base.Bucket, Key: &key})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := client.UploadPart(t.Context(), &s3.UploadPartInput{Bucket: &base.Bucket, Key: &key, UploadId: up.UploadId,
		PartNumber: aws.Int32(1), Body: bytes.NewReader(make([]byte, 1<<19)), ContentLength: aws.Int64(1 << 19)}); err != nil {
		t.Fatal(err)
	}
}

// verify reports the leftovers of the whole root and stays OK;
// reconcile-state --dry-run reports them, reconcile-state removes them.
func TestVerifyAndReconcileLeftoversOnBothBackends(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, newRoot newRootFunc) {
		h, root, base := twoOwners(t, newRoot)
		h.Service.Engine.LeftoverAge = time.Minute
		if base.Backend == config.BackendS3 {
			h.Service.Engine.LeftoverAge = time.Nanosecond // the server stamps uploads now
		}
		h.MustPublish(t1, pipeA, "latest", "weatherreporter.today", map[string]string{"a.txt": "alpha"})
		leaveLeftover(t, root, base, "big/blob.bin")

		rep, err := h.verify("latest", all)
		if err != nil || !rep.OK() || rep.Checked != 1 {
			t.Fatalf("verify = %+v, %v; want 1 checked, OK (leftovers are not damage)", rep, err)
		}
		lo := rep.Leftovers
		if lo.Count != 1 || lo.Bytes != 1<<19 || lo.Oldest == nil || len(lo.Paths) != 1 || path.Dir(lo.Paths[0]) != "big" {
			t.Fatalf("verify leftovers = %+v; want one of 512 KiB in big/", lo)
		}
		var dry engine.MaintenanceResult
		if err := h.withLease(t1, "latest", func(root storage.Backend, l lease.Lease) error {
			var err error
			dry, err = h.Service.Engine.Reconcile(t.Context(), root, l, planner.Selector{AllOwners: true}, engine.ReconcileOptions{DryRun: true})
			return err
		}); err != nil {
			t.Fatal(err)
		}
		if dry.Leftovers.Count != 1 {
			t.Fatalf("reconcile dry run: leftovers %+v, want 1 found", dry.Leftovers)
		}
		if rep, _ := h.verify("latest", all); rep.Leftovers.Count != 1 {
			t.Fatalf("the dry run removed leftovers: %+v", rep.Leftovers)
		}
		res, err := h.reconcile(t1, "latest", planner.Selector{AllOwners: true}, false)
		if err != nil || res.Leftovers.Count != 1 || res.Leftovers.Bytes != 1<<19 {
			t.Fatalf("reconcile: leftovers %+v, %v; want 1 of 512 KiB removed", res.Leftovers, err)
		}
		if rep, err := h.verify("latest", all); err != nil || rep.Leftovers.Count != 0 || !rep.OK() {
			t.Fatalf("verify after reconcile: %+v, %v; want no leftovers", rep, err)
		}
		if got := mustRead(t, root, "a.txt"); got != "alpha" {
			t.Fatalf("a.txt = %q after the clean-up", got)
		}
	})
}
