package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/distributor/distributor/catalog"
	"github.com/distributor/distributor/config"
	"github.com/distributor/distributor/events"
	"github.com/distributor/distributor/lease"
	"github.com/distributor/distributor/storage"
	"github.com/distributor/distributor/stores"
	"github.com/distributor/distributor/testenv"
	"github.com/distributor/distributor/testenv/schematest"
)

// abandonLock leaves a lock object in root as a direct-mode run on
// another host does when it dies: held until it expires. It returns its id.
func abandonLock(t *testing.T, root storage.Backend, rootKey string) string {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	gone := lease.NewStorageLocker("direct dev on otherhost pid 4242", directLockTTL, lease.WithProcess("otherhost", 4242, func(int) bool { return true }))
	if _, err := gone.Acquire(ctx, lease.Root{Key: rootKey, Store: root}); err != nil {
		t.Fatal(err)
	}
	cancel() // no renewals: it stays until it expires
	h, err := lease.ReadLock(context.Background(), root, time.Now())
	if err != nil || h == nil {
		t.Fatalf("ReadLock: %+v, %v", h, err)
	}
	return h.ID
}

// decodeUnlock checks unlock --json output against docs/schema/unlock.json
// and decodes it.
func decodeUnlock(t *testing.T, out string) unlockJSON {
	t.Helper()
	if err := schematest.New(t).Validate(t, "unlock.json", []byte(out)); err != nil {
		t.Fatalf("unlock --json does not match docs/schema/unlock.json: %v\n%s", err, out)
	}
	var rep unlockJSON
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatal(err)
	}
	return rep
}

// checkUnlockObject: apply on a root a dead run left locked fails with
// exit 3 and a line naming the lock id and the unlock command; unlock with
// another id exits 3 and removes nothing; unlock with the id removes the
// lock object (--json matching its schema), apply then succeeds, and
// unlock once more finds nothing to remove.
func checkUnlockObject(t *testing.T, e *cliEnv, root storage.Backend, rootKey, shown string) {
	t.Helper()
	e.leaseWait = 100 * time.Millisecond
	b := e.bundle("b", "weatherreporter.today", map[string]string{"a.txt": "one\n"})
	id := abandonLock(t, root, rootKey)

	_, errOut, code := e.run("apply", "--pipeline", pipeDaily, "--bundle", b.Dir)
	hint := "lock id " + id + "; if that holder is gone, break the lock with `distributor unlock --destination latest --id " + id + "`\n"
	if code != exitRefused || strings.Count(errOut, "\n") != 1 || !strings.Contains(errOut, "is locked by direct dev on otherhost pid 4242 (pid 4242 on otherhost) until ") ||
		!strings.HasSuffix(errOut, hint) {
		t.Fatalf("apply on the locked root: exit %d, stderr %q; want 3 and one line ending in %q", code, errOut, hint)
	}

	out, errOut, code := e.run("unlock", "--destination", "latest", "--id", "0123456789abcdef")
	if code != exitRefused || out != "" || !strings.HasPrefix(errOut, "distributor: latest ("+shown+") is not locked with id 0123456789abcdef: lock id does not match: ") ||
		!strings.Contains(errOut, `has id "`+id+`", not "0123456789abcdef"; nothing was removed`) {
		t.Errorf("unlock with another id: exit %d, stdout %q, stderr %q; want 3 and nothing removed", code, out, errOut)
	}
	if h, err := lease.ReadLock(context.Background(), root, time.Now()); err != nil || h == nil || h.ID != id {
		t.Fatalf("the lock after an unlock with another id: %+v, %v", h, err)
	}

	out, errOut, code = e.run("unlock", "--destination", "latest", "--id", id, "--json")
	if code != exitOK {
		t.Fatalf("unlock: exit %d\n%s%s", code, out, errOut)
	}
	rep := decodeUnlock(t, out)
	if rep.DestinationID != "latest" || rep.ID != id || len(rep.Removed) != 1 || len(rep.Held) != 0 || rep.Error != "" {
		t.Errorf("unlock --json: %+v", rep)
	}
	if r := rep.Removed[0]; r.Kind != lease.KindLockObject || r.ID != id || r.Host != "otherhost" || r.PID != 4242 || r.Expires.IsZero() {
		t.Errorf("removed %+v", r)
	}
	if h, err := lease.ReadLock(context.Background(), root, time.Now()); err != nil || h != nil {
		t.Fatalf("the lock after unlock: %+v, %v", h, err)
	}
	e.apply(pipeDaily, b)
	out, _, code = e.run("unlock", "--destination", "latest", "--id", id)
	if want := "latest (" + shown + ") is not locked: nothing to remove\n"; code != exitOK || out != want {
		t.Errorf("unlock of a free root: exit %d, stdout %q; want 0, %q", code, out, want)
	}
}

func TestUnlockLockObjectLocal(t *testing.T) {
	t.Parallel()
	e := newCLIEnv(t)
	dir := e.root("site")
	e.oneDest(pipeDaily, destSpec{ID: "latest", Root: dir})
	root, err := stores.New(nil).Destination(context.Background(), config.Destination{ID: "latest", Backend: config.BackendLocal, Path: dir})
	if err != nil {
		t.Fatal(err)
	}
	checkUnlockObject(t, e, root, "file://"+dir+"/", dir)
	e.wantFiles(dir, map[string]string{"a.txt": "one\n", catalog.FileName: ""})
}

func TestUnlockLockObjectS3(t *testing.T) {
	// Not parallel: the AWS chain comes from the environment.
	srv := testenv.NewS3(t)
	srv.UseStandardChain(t)
	bucket := srv.Bucket(t)
	e := newCLIEnv(t)
	e.writeFile(e.cfg, "nats:\n  listen: 127.0.0.1:1\npipelines:\n  - {id: "+pipeDaily+", destinations: [latest]}\ndestinations:\n"+
		"  - {id: latest, backend: s3, bucket: "+bucket+", path: site/, endpoint: \""+srv.URL+"\", region: us-east-1, path_style: true}\n")
	root := srv.Backend(t, bucket, "site/")
	checkUnlockObject(t, e, root, "s3://"+bucket+"/site/", "s3://"+bucket+"/site/")
	if h, err := lease.ReadLock(context.Background(), root, time.Now()); err != nil || h != nil {
		t.Errorf("lock after apply: %+v, %v", h, err)
	}
}

// With NATS, unlock also breaks the root's KV lease: a serve process that
// died holding it blocks apply (exit 3, naming the lease id and the
// command) until unlock removes it.
func TestUnlockKVLease(t *testing.T) {
	t.Parallel()
	e := newNATSEnv(t)
	ctx := context.Background()
	cfg, err := config.Load(e.cfg)
	if err != nil {
		t.Fatal(err)
	}
	d, _ := cfg.Destination("d1")
	st, err := events.Setup(ctx, e.nats.JetStream(t), events.SetupConfig{})
	if err != nil {
		t.Fatal(err)
	}
	hctx, cancel := context.WithCancel(ctx)
	if _, err := lease.NewKV(e.nats.JetStream(t), st.Leases, "serve dev on otherhost pid 7", time.Minute).Acquire(hctx, lease.Root{Key: d.RootKey()}); err != nil {
		t.Fatal(err)
	}
	cancel()
	h, err := lease.ReadKV(ctx, st.Leases, d.RootKey(), time.Now())
	if err != nil || h == nil {
		t.Fatalf("ReadKV: %+v, %v", h, err)
	}
	run := func(args ...string) (int, string, string) {
		var out, errb bytes.Buffer
		a := newApp(&out, &errb)
		a.leaseWait = 100 * time.Millisecond
		code := a.run(ctx, append(args, "--config", e.cfg))
		return code, out.String(), errb.String()
	}
	b := e.makeBundle(t, "b1", "src.one", map[string]string{"a.txt": "a\n"})
	code, _, errOut := run("apply", "--pipeline", "p.one", "--bundle", b, "--destination", "d1")
	hint := "lease id " + h.ID + "; retry after it finishes (a dead holder's lease expires within 1m0s); if that holder is gone, break the lock with `distributor unlock --destination d1 --id " + h.ID + "`"
	if code != exitRefused || !strings.Contains(errOut, hint) {
		t.Fatalf("apply on the held root: exit %d, stderr %q; want 3 naming %q", code, errOut, hint)
	}
	code, out, errOut := run("unlock", "--destination", "d1", "--id", "0123456789abcdef", "--json")
	if rep := decodeUnlock(t, out); code != exitRefused || len(rep.Removed) != 0 || len(rep.Held) != 1 || rep.Held[0].Kind != lease.KindKVLease ||
		!strings.Contains(rep.Error, "lock id does not match") || "distributor: "+rep.Error+"\n" != errOut {
		t.Errorf("unlock with another id: exit %d, %+v, stderr %q", code, rep, errOut)
	}
	// With a lock object of a third id too, both refusals are named, one
	// after the other.
	lockFile := filepath.Join(e.roots["d1"], filepath.FromSlash(lease.LockPath))
	if err := os.MkdirAll(filepath.Dir(lockFile), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(lockFile, []byte(`{"id":"feedfacefeedface","holder":"direct","host":"otherhost","pid":4242,"expires":"`+
		time.Now().Add(time.Minute).UTC().Format(time.RFC3339)+`","generation":1}`), 0o644); err != nil {
		t.Fatal(err)
	}
	code, _, errOut = run("unlock", "--destination", "d1", "--id", "0123456789abcdef")
	if code != exitRefused || !strings.Contains(errOut, `has id "feedfacefeedface", not "0123456789abcdef"; nothing was removed; lock id does not match: the lease on `) {
		t.Errorf("unlock with another id than both locks': exit %d, stderr %q", code, errOut)
	}
	if err := os.Remove(lockFile); err != nil {
		t.Fatal(err)
	}
	code, out, errOut = run("unlock", "--destination", "d1", "--id", h.ID)
	if want := "removed the NATS lease of d1 (" + e.roots["d1"] + "): held by serve dev on otherhost pid 7 since "; code != exitOK || !strings.HasPrefix(out, want) {
		t.Fatalf("unlock: exit %d, stdout %q, stderr %q; want 0 and %q", code, out, errOut, want)
	}
	if code, out, errOut := run("apply", "--pipeline", "p.one", "--bundle", b, "--destination", "d1"); code != exitOK {
		t.Fatalf("apply after unlock: exit %d\n%s%s", code, out, errOut)
	}
}

// A lock object whose expiry lies a year away (its holder's clock ran
// ahead) does not block the root: apply takes it over and warns.
func TestLockFromTheFutureIsTakenOver(t *testing.T) {
	t.Parallel()
	e := newCLIEnv(t)
	dir := e.root("site")
	e.oneDest(pipeDaily, destSpec{ID: "latest", Root: dir})
	e.writeFile(dir+"/"+lease.LockPath, `{"id":"feedfacefeedface","holder":"direct","host":"otherhost","pid":4242,`+
		`"acquired":"`+time.Now().AddDate(1, 0, 0).Format(time.RFC3339)+`","expires":"`+time.Now().AddDate(1, 0, 0).Add(time.Minute).Format(time.RFC3339)+`","generation":1}`)
	b := e.bundle("b", "weatherreporter.today", map[string]string{"a.txt": "one\n"})
	out, errOut, code := e.run("apply", "--pipeline", pipeDaily, "--bundle", b.Dir, "--log-format", "json")
	if code != exitOK || !strings.Contains(errOut, `"level":"warn"`) || !strings.Contains(errOut, "its holder's clock ran ahead") ||
		!strings.Contains(errOut, `"lock_id":"feedfacefeedface"`) {
		t.Fatalf("apply on a root locked until next year: exit %d\n%s%s\nwant 0 and a warning", code, out, errOut)
	}
	e.wantFiles(dir, map[string]string{"a.txt": "one\n", catalog.FileName: ""})
}
