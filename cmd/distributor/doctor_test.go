package main

import (
	"bytes"
	"context"
	"encoding/json"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/distributor/distributor/testenv"
	"github.com/distributor/distributor/testenv/schematest"
)

// doctorEnv configures a local root and an S3 root on the in-process
// server (whose conditional writes hold a race).
func doctorEnv(t *testing.T) *cliEnv {
	t.Helper()
	srv := testenv.NewS3(t)
	if srv.External {
		t.Skip("doctor's verdict on an external server is what it measures (.ci/s3-real prints it)")
	}
	bucket := srv.Bucket(t)
	e := newCLIEnv(t)
	t.Setenv("AWS_ACCESS_KEY_ID", "test")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "test")
	e.writeFile(e.cfg, "pipelines:\n  - {id: p, destinations: [disk, bucket]}\ndestinations:\n"+
		"  - {id: disk, backend: local, path: "+e.root("disk")+"}\n"+
		"  - {id: bucket, backend: s3, bucket: "+bucket+", path: site/, endpoint: \""+srv.URL+"\", region: us-east-1, path_style: true}\n")
	return e
}

// doctor on healthy storage: one ✔ line per check, exit 0; --json
// matches docs/schema/cli-doctor.json and names every check of each
// backend.
func TestDoctorHealthyStorage(t *testing.T) {
	e := doctorEnv(t)
	out, errOut, code := e.run("doctor")
	if code != exitOK || strings.Contains(out, "✖") {
		t.Fatalf("doctor exit %d, want 0\n%s%s", code, out, errOut)
	}
	for _, want := range []string{"disk (", "  ✔ rename: ", "  ✔ link: ", "  ✔ fsync: ", "bucket (s3://", "  ✔ update_race: 8 writers × 10 If-Match updates: none lost", "  ✔ multipart_abort: ", "  ✔ clock: "} {
		if !strings.Contains(out, want) {
			t.Errorf("doctor output lacks %q:\n%s", want, out)
		}
	}
	out, _, code = e.run("doctor", "--destination", "disk", "--json")
	if code != exitOK {
		t.Fatalf("doctor --json exit %d\n%s", code, out)
	}
	if err := schematest.New(t).Validate(t, "cli-doctor.json", []byte(out)); err != nil {
		t.Fatalf("doctor --json does not match docs/schema/cli-doctor.json: %v\n%s", err, out)
	}
	var rep doctorJSON
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatal(err)
	}
	if len(rep.Destinations) != 1 || rep.Destinations[0].DestinationID != "disk" || !rep.OK || len(rep.Destinations[0].Checks) != 11 {
		t.Fatalf("doctor --destination disk --json = %+v", rep)
	}
}

// A server whose clock is further from this host's than max_clock_skew
// fails the clock check: a ✖ line saying what follows, exit 1, and
// --json says the same (matching its schema).
func TestDoctorClockSkew(t *testing.T) {
	e := doctorEnv(t)
	e.now = func() time.Time { return time.Now().Add(-10 * time.Minute) }
	out, errOut, code := e.run("doctor", "--destination", "bucket")
	if code != exitFailed {
		t.Fatalf("doctor exit %d, want 1\n%s%s", code, out, errOut)
	}
	// The server's Date header has whole seconds, stamped at some point
	// of the request: the skew seen is 10 min within a second plus the
	// request's duration, which a loaded machine stretches.
	m := regexp.MustCompile(`\n  ✖ clock: the server's clock is (\S+) from this host's, over max_clock_skew 5m0s: lease expiry`).FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("no ✖ clock line:\n%s", out)
	}
	if skew, err := time.ParseDuration(m[1]); err != nil || (skew-10*time.Minute).Abs() > 2*time.Second {
		t.Errorf("clock skew %s, want 10m0s within 2s:\n%s", m[1], out)
	}
	if !strings.Contains(errOut, "distributor: the storage of [bucket] does not keep what distributor relies on") {
		t.Errorf("stderr = %q", errOut)
	}
	out, _, code = e.run("doctor", "--destination", "bucket", "--json")
	if code != exitFailed {
		t.Fatalf("doctor --json exit %d, want 1", code)
	}
	if err := schematest.New(t).Validate(t, "cli-doctor.json", []byte(out)); err != nil {
		t.Fatalf("doctor --json does not match docs/schema/cli-doctor.json: %v\n%s", err, out)
	}
}

// An unknown destination is a usage error.
func TestDoctorUnknownDestination(t *testing.T) {
	e := doctorEnv(t)
	if _, errOut, code := e.run("doctor", "--destination", "nope"); code != exitUsage || !strings.Contains(errOut, `unknown destination "nope"`) {
		t.Fatalf("exit %d, stderr %q; want 2 naming the destination", code, errOut)
	}
}

// serve's start-up checks log a warning naming doctor for a check that
// fails, and none while everything holds.
func TestServeStartChecksWarn(t *testing.T) {
	e := doctorEnv(t)
	var logs bytes.Buffer
	a := newApp(&bytes.Buffer{}, &bytes.Buffer{})
	a.configPath, a.log = e.cfg, zerolog.New(&logs)
	cfg, err := a.loadConfig()
	if err != nil {
		t.Fatal(err)
	}
	a.doctorAtStart(context.Background(), cfg)
	if logs.Len() != 0 {
		t.Fatalf("warnings on healthy storage:\n%s", logs.String())
	}
	a.now = func() time.Time { return time.Now().Add(time.Hour) }
	a.doctorAtStart(context.Background(), cfg)
	if got := logs.String(); !strings.Contains(got, `"check":"clock"`) || !strings.Contains(got, "run `distributor doctor --destination bucket`") || strings.Contains(got, `"destination":"disk"`) {
		t.Fatalf("warnings = %s", got)
	}
}
