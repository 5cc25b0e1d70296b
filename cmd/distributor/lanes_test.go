package main

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/distributor/distributor/bundle"
	"github.com/distributor/distributor/catalog"
	"github.com/distributor/distributor/storage"
	"github.com/distributor/distributor/testenv"
)

// lanesConfig writes a configuration of two pipelines, each with its own
// destination and its bundles under bundles/<name> of the env (weather
// also in the S3 prefix s3Allowed, when not ""), and returns the roots.
func (e *cliEnv) lanesConfig(s3Allowed, s3Block string) (site, tides string) {
	e.t.Helper()
	site, tides = e.root("site"), e.root("tides")
	weatherIn := `"` + filepath.Join(e.dir, "bundles", "weather") + `"`
	if s3Allowed != "" {
		weatherIn += `, "` + s3Allowed + `"`
	}
	e.writeFile(e.cfg, "nats:\n  listen: 127.0.0.1:1\n"+s3Block+`pipelines:
  - id: `+pipeDaily+`
    destinations: [latest]
    bundle_locations: [`+weatherIn+`]
  - id: `+pipeTides+`
    destinations: [tides]
    bundle_locations: ["`+filepath.Join(e.dir, "bundles", "tides")+`"]
destinations:
  - {id: latest, backend: local, path: "`+site+`"}
  - {id: tides, backend: local, path: "`+tides+`"}
`)
	return site, tides
}

// notAllowedLine is the one stderr line of a bundle refused for the
// weather pipeline.
func notAllowedLine(loc, why, allowed string) string {
	return "distributor: bundle location not allowed: bundle " + loc + ` of pipeline "` + pipeDaily + `" ` + why +
		" (bundle_locations: " + allowed + `): publish it from one of them, or add a folder or s3:// prefix that holds it to the bundle_locations of pipeline "` +
		pipeDaily + `" in the configuration`
}

// Rule (direct mode): apply, plan and publish refuse a bundle outside the
// pipeline's bundle_locations, directly, through "..", through a symlink
// or in another bucket, with exit 2 and one line naming the bundle, the
// pipeline, the allowed locations and the fix, before anything is read
// (publish does not even look for NATS); no root changes, not even one
// that holds a catalog already. A bundle inside publishes.
func TestRuleBundleLocationsDirect(t *testing.T) {
	t.Parallel()
	e := newCLIEnv(t)
	site, tides := e.lanesConfig("s3://bundles/weather/", "")
	bundles := filepath.Join(e.dir, "bundles")
	allowed := filepath.Join(bundles, "weather") + ", s3://bundles/weather/"

	first := e.bundle("weather/b1", "weatherreporter.today", map[string]string{"report.md": "# Today\n"})
	e.apply(pipeDaily, first)
	outside := e.bundle("elsewhere/b2", "weatherreporter.today", map[string]string{"report.md": "# Forged\n"})
	theirs := e.bundle("tides/t1", "weatherreporter.today", map[string]string{"report.md": "# Tides\n"})
	if err := os.Symlink(filepath.Join(bundles, "tides"), filepath.Join(bundles, "weather", "link")); err != nil {
		t.Fatal(err)
	}

	siteBefore, tidesBefore := e.snapshot(site), e.snapshot(tides)
	for _, c := range []struct {
		name, loc, why string
	}{
		{"outside", outside.Dir, "lies outside them"},
		{"dotdot", filepath.Join(bundles, "weather") + "/../elsewhere/b2", "is " + outside.Dir + ", outside them"},
		{"symlink", filepath.Join(bundles, "weather", "link", "t1"), "is " + theirs.Dir + ", outside them"},
		{"other bucket", "s3://other-bucket/weather/b1/", "lies outside them"},
		{"other prefix", "s3://bundles/weather-old/b1/", "lies outside them"},
	} {
		for _, cmd := range []string{"apply", "plan", "publish"} {
			out, errOut, code := e.run(cmd, "--pipeline", pipeDaily, "--bundle", c.loc)
			if code != exitUsage || out != "" {
				t.Errorf("%s %s: exit %d, stdout %q; want 2 and nothing", cmd, c.name, code, out)
			}
			stderrLine(t, errOut, notAllowedLine(c.loc, c.why, allowed))
		}
	}
	e.sameSnapshot("refused bundles", siteBefore, e.snapshot(site))
	e.sameSnapshot("refused bundles", tidesBefore, e.snapshot(tides))

	// Inside, through the symlink-free spelling or not: published.
	second := e.bundle("weather/b3", "weatherreporter.today", map[string]string{"report.md": "# Today, later\n"})
	if out, errOut, code := e.run("plan", "--pipeline", pipeDaily, "--bundle", second.Dir); code != exitOK || !strings.Contains(out, "update 1") {
		t.Errorf("plan inside: exit %d\n%s%s", code, out, errOut)
	}
	e.apply(pipeDaily, second)
	e.wantFiles(site, map[string]string{"report.md": "# Today, later\n", catalog.FileName: ""})
}

// Rule (direct mode): --destination stays within the pipeline's
// destinations: naming another pipeline's destination exits 2 with one
// line, and writes nothing, not even to the pipeline's own destination
// named beside it.
func TestRuleDestinationsStayInThePipelineDirect(t *testing.T) {
	t.Parallel()
	e := newCLIEnv(t)
	site, tides := e.lanesConfig("", "")
	b := e.bundle("weather/b1", "weatherreporter.today", map[string]string{"report.md": "# Today\n"})
	siteBefore, tidesBefore := e.snapshot(site), e.snapshot(tides)
	for _, dests := range [][]string{{"tides"}, {"latest", "tides"}} {
		for _, cmd := range []string{"apply", "plan"} {
			args := []string{cmd, "--pipeline", pipeDaily, "--bundle", b.Dir}
			for _, d := range dests {
				args = append(args, "--destination", d)
			}
			out, errOut, code := e.run(args...)
			if code != exitUsage || out != "" {
				t.Errorf("%s %v: exit %d, stdout %q; want 2 and nothing", cmd, dests, code, out)
			}
			stderrLine(t, errOut, `distributor: unknown destination "tides": pipeline "`+pipeDaily+`" publishes to [latest]`)
		}
	}
	e.sameSnapshot("another pipeline's destination", siteBefore, e.snapshot(site))
	e.sameSnapshot("another pipeline's destination", tidesBefore, e.snapshot(tides))
}

// Rule (direct mode, S3): a bundle in the allowed bucket and prefix is
// read and published; the same bundle in another bucket is refused with
// exit 2 and nothing written.
func TestRuleBundleLocationsS3Direct(t *testing.T) {
	// Not parallel: the AWS chain comes from the environment.
	srv := testenv.NewS3(t)
	srv.UseStandardChain(t)
	allowedBucket, otherBucket := srv.Bucket(t), srv.Bucket(t)
	e := newCLIEnv(t)
	site, tides := e.lanesConfig("s3://"+allowedBucket+"/weather/",
		"s3: {endpoint: \""+srv.URL+"\", region: us-east-1, path_style: true}\n")
	local := e.bundle("elsewhere/b1", "weatherreporter.today", map[string]string{"report.md": "# Today\n"})
	upload := func(bucket string) string {
		b := srv.Backend(t, bucket, "weather/b1/")
		for _, p := range []string{"report.md", bundle.ManifestName} {
			data, err := os.ReadFile(filepath.Join(local.Dir, p))
			if err != nil {
				t.Fatal(err)
			}
			if _, err := b.Put(context.Background(), p, strings.NewReader(string(data)), int64(len(data)), storage.PutOptions{}); err != nil {
				t.Fatal(err)
			}
		}
		return "s3://" + bucket + "/weather/b1/"
	}
	inOther, inAllowed := upload(otherBucket), upload(allowedBucket)

	allowed := filepath.Join(e.dir, "bundles", "weather") + ", s3://" + allowedBucket + "/weather/"
	for _, cmd := range []string{"apply", "plan", "publish"} {
		out, errOut, code := e.run(cmd, "--pipeline", pipeDaily, "--bundle", inOther, "--digest", local.Digest)
		if code != exitUsage || out != "" {
			t.Errorf("%s in another bucket: exit %d, stdout %q; want 2 and nothing", cmd, code, out)
		}
		stderrLine(t, errOut, notAllowedLine(inOther, "lies outside them", allowed))
	}
	e.wantFiles(site, map[string]string{})
	e.wantFiles(tides, map[string]string{})

	if out, errOut, code := e.run("apply", "--pipeline", pipeDaily, "--bundle", inAllowed, "--digest", local.Digest); code != exitOK {
		t.Fatalf("apply from the allowed bucket: exit %d\n%s%s", code, out, errOut)
	}
	e.wantFiles(site, map[string]string{"report.md": "# Today\n", catalog.FileName: ""})
	e.wantFiles(tides, map[string]string{})
}

// config validate and serve warn, once and without failing, when some of
// several pipelines declare no bundle_locations.
func TestWarnPipelinesWithoutBundleLocations(t *testing.T) {
	t.Parallel()
	e := newCLIEnv(t)
	root := e.root("site")
	e.writeFile(e.cfg, "nats:\n  listen: 127.0.0.1:1\npipelines:\n  - {id: "+pipeDaily+", destinations: [a]}\n  - {id: "+pipeTides+", destinations: [a]}\n"+
		"destinations:\n  - {id: a, backend: local, path: \""+root+"\"}\n")
	const warning = "2 of 2 pipelines declare no bundle_locations (weatherreporter.daily, tides.hourly): they accept a bundle from any location, so a producer can have another pipeline's bundles published under theirs; list each pipeline's bundle folders or s3:// prefixes under bundle_locations"
	out, errOut, code := e.run("config", "validate")
	if code != exitOK || !strings.HasPrefix(out, e.cfg+": ok, 2 pipeline(s), 1 destination(s)\n") {
		t.Errorf("config validate: exit %d, stdout %q", code, out)
	}
	stderrLine(t, errOut, "distributor: warning: "+warning)

	// serve warns at start-up, before it looks for NATS (here: a port in
	// use, so that it stops right after).
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	cfg, err := os.ReadFile(e.cfg)
	if err != nil {
		t.Fatal(err)
	}
	e.writeFile(e.cfg, strings.Replace(string(cfg), "listen: 127.0.0.1:1", "listen: "+l.Addr().String()+"\n  store_dir: \""+filepath.Join(e.dir, "nats")+"\"", 1))
	_, errOut, code = e.run("serve", "--log-format", "json", "--http-addr", "off")
	if code == exitOK || !strings.Contains(errOut, `"level":"warn"`) || strings.Count(errOut, warning) != 1 {
		t.Errorf("serve: exit %d, stderr:\n%s\nwant one warn line %q", code, errOut, warning)
	}

	// With every pipeline's bundle_locations declared: no warning.
	_, _ = e.lanesConfig("", "")
	if _, errOut, code := e.run("config", "validate"); code != exitOK || errOut != "" {
		t.Errorf("config validate with bundle_locations: exit %d, stderr %q", code, errOut)
	}
}
