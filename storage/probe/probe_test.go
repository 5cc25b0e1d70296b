package probe_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/distributor/distributor/storage"
	"github.com/distributor/distributor/storage/local"
	"github.com/distributor/distributor/storage/probe"
	"github.com/distributor/distributor/testenv"
)

func report(checks []probe.Check) string {
	var b strings.Builder
	for _, c := range checks {
		fmt.Fprintf(&b, "%s ok=%v: %s\n", c.Name, c.OK, c.Detail)
	}
	return b.String()
}

func names(checks []probe.Check) string {
	var n []string
	for _, c := range checks {
		n = append(n, c.Name)
	}
	return strings.Join(n, " ")
}

// The in-process S3 server keeps everything distributor relies on, and
// every check runs on it.
func TestS3ServerKeepsTheContract(t *testing.T) {
	env := testenv.NewS3(t)
	if env.External {
		t.Skip("the test server is external: what it keeps is measured by doctor, not asserted here")
	}
	b := env.Backend(t, env.Bucket(t), "root")
	checks := probe.Backend(t.Context(), b, probe.Options{Races: true})
	if any, _ := probe.Failed(checks); any {
		t.Fatalf("checks failed on gofakes3:\n%s", report(checks))
	}
	want := "write read list delete create_if_absent if_match create_race update_race multipart_abort clock"
	if got := names(checks); got != want {
		t.Fatalf("checks = %s, want %s", got, want)
	}
}

// A local root keeps the contract, its file system does what the local
// backend needs, and the probe leaves nothing behind.
func TestLocalRootKeepsTheContract(t *testing.T) {
	dir := t.TempDir()
	b, err := local.New(dir)
	if err != nil {
		t.Fatal(err)
	}
	checks := append(probe.Backend(t.Context(), b, probe.Options{Races: true}), probe.Folder(dir)...)
	if any, _ := probe.Failed(checks); any {
		t.Fatalf("checks failed on a local root:\n%s", report(checks))
	}
	want := "write read list delete create_if_absent if_match create_race update_race rename link fsync"
	if got := names(checks); got != want {
		t.Fatalf("checks = %s, want %s", got, want)
	}
}

// twoStepCAS checks the version and then writes, in two steps, as a
// server whose conditional writes are not atomic does.
type twoStepCAS struct{ storage.Backend }

func (b twoStepCAS) WriteIfVersion(ctx context.Context, p string, data []byte, want storage.Version, _ ...storage.Option) (storage.Version, error) {
	_, cur, err := b.ReadVersion(ctx, p)
	switch {
	case errors.Is(err, storage.ErrNotExist):
		cur = ""
	case err != nil:
		return "", err
	}
	if cur != want {
		return "", storage.ErrConflict
	}
	time.Sleep(time.Millisecond) // another writer's check passes here too
	if _, err := b.Put(ctx, p, bytes.NewReader(data), int64(len(data)), storage.PutOptions{}); err != nil {
		return "", err
	}
	_, v, err := b.ReadVersion(ctx, p)
	return v, err
}

// A storage whose conditional writes check and write in two steps
// passes the one-writer checks and fails both races, as fence failures
// that name what is lost.
func TestNonAtomicConditionsFailTheRaces(t *testing.T) {
	dir := t.TempDir()
	lb, err := local.New(dir)
	if err != nil {
		t.Fatal(err)
	}
	checks := probe.Backend(t.Context(), twoStepCAS{lb}, probe.Options{Races: true})
	got := map[string]probe.Check{}
	for _, c := range checks {
		got[c.Name] = c
	}
	for _, name := range []string{"create_if_absent", "if_match"} {
		if !got[name].OK {
			t.Errorf("%s failed: %s", name, got[name].Detail)
		}
	}
	for _, name := range []string{"create_race", "update_race"} {
		if c := got[name]; c.OK || !c.Fence || c.Consequence == "" {
			t.Errorf("%s = %+v, want a failed fence check with its consequence", name, c)
		}
	}
	if _, fence := probe.Failed(checks); !fence {
		t.Error("Failed reports no fence failure")
	}
	if !strings.Contains(got["update_race"].Detail, "updates lost") {
		t.Errorf("update_race detail %q does not say updates were lost", got["update_race"].Detail)
	}
	left, err := os.ReadDir(filepath.Join(dir, ".distributor"))
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		t.Fatal(err)
	}
	for _, e := range left {
		if strings.HasPrefix(e.Name(), "doctor-") {
			t.Errorf("scratch folder %s left in .distributor/", e.Name())
		}
	}
}
