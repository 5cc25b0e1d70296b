package service_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/distributor/distributor/bundle"
	"github.com/distributor/distributor/catalog"
	"github.com/distributor/distributor/engine"
	"github.com/distributor/distributor/events"
	"github.com/distributor/distributor/planner"
	"github.com/distributor/distributor/service"
)

func digestN(c string) string { return "sha256:" + strings.Repeat(c, 64) }

// published is a published result event of dest with a source version.
func published(id, pipeline, dest, bundle, digest string, at time.Time) events.Result {
	return events.Result{Type: events.TypePublished, ID: id + "." + dest, BundleEventID: id, PipelineID: pipeline, DestinationID: dest,
		Bundle: bundle, Source: &events.SourceRef{ID: "w.today", Digest: digest, Created: t0}, Time: at}
}

// FindVersion finds a publication in a destination's history (newest
// first) by its event id, its bundle event id or its digest (whole or its
// start; the newest publication with a bundle location wins), and says
// what to do when it cannot.
func TestFindVersion(t *testing.T) {
	t.Parallel()
	history := []events.Result{
		published("e4", pipeA, "site", "/b/v2-again", digestN("b"), t2),
		{Type: events.TypeFailed, ID: "e3.site", BundleEventID: "e3", PipelineID: pipeA, DestinationID: "site", Reason: events.ReasonRootMissing},
		published("e2", pipeA, "site", "/b/v2", digestN("b"), t1),
		published("e1", pipeB, "site", "", digestN("a"), t0),
		published("e0", pipeA, "site", "/b/v1", digestN("a"), t0),
	}
	for _, c := range []struct {
		to, pipeline string
		want         string // "event bundle digest" or the error's start
	}{
		{"e2.site", "", "e2.site /b/v2 " + digestN("b")},
		{"e2", "", "e2.site /b/v2 " + digestN("b")},
		{digestN("b"), "", "e4.site /b/v2-again " + digestN("b")},
		{"sha256:bbbbbbbb", "", "e4.site /b/v2-again " + digestN("b")},
		{"sha256:aaaaaaaa", pipeA, "e0.site /b/v1 " + digestN("a")},
		{"sha256:aaaaaaaa", "", "unknown version: pipelines " + pipeB + ", " + pipeA + " all published sha256:aaaaaaaa to site: give --pipeline"},
		{"sha256:aaaaaaaa", pipeB, "unknown version: event e1.site (w.today@2026-06-19T12:00:00Z sha256:aaaaaaaaaaaa) does not say where its bundle was"},
		{"e3.site", "", "unknown version: event e3.site is a failed result of site, not a publication"},
		{"e2", pipeB, "unknown version: no published event e2 of " + pipeB + "/site in the events stream"},
		{"sha256:cccccccc", "", "unknown version: no published event of site in the events stream has digest sha256:cccccccc"},
	} {
		v, err := service.FindVersion(history, "site", c.pipeline, c.to)
		got := v.EventID + " " + v.Bundle + " " + v.Digest
		if err != nil {
			got = err.Error()
			if !errors.Is(err, service.ErrUnknownVersion) {
				t.Errorf("--to %s: %v does not wrap ErrUnknownVersion", c.to, err)
			}
		}
		if !strings.HasPrefix(got, c.want) {
			t.Errorf("--to %s --pipeline %q:\n got %s\nwant %s…", c.to, c.pipeline, got, c.want)
		}
	}
	// Ambiguous starts of digests need more digits.
	ambiguous := append(history, published("e5", pipeA, "site", "/b/x", "sha256:bbbbbbbb"+strings.Repeat("0", 56), t2))
	if _, err := service.FindVersion(ambiguous, "site", "", "sha256:bbbbbbbb"); err == nil || !strings.Contains(err.Error(), "is the start of 2 digests") {
		t.Errorf("ambiguous digest: %v", err)
	}
	for _, ref := range []string{"sha256:abc", "sha256:ABCDEF01", "abcdef0123", "sha256:" + strings.Repeat("a", 65)} {
		if service.IsDigestRef(ref) {
			t.Errorf("IsDigestRef(%q) = true", ref)
		}
	}
}

// CheckVersion writes nothing and names the location when the bundle is
// gone or changed; otherwise it completes the version from the manifest.
func TestCheckVersion(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	h := newHarness(t)
	dir, digest := makeBundle(t, "w.today", map[string]string{"a.txt": "a\n"})
	v, b, err := h.Service.CheckVersion(ctx, service.Version{DestinationID: "site", Bundle: dir, Digest: digest[:20]})
	if err != nil || b == nil || v.Digest != digest || v.Source == nil || v.Source.ID != "w.today" || !v.Source.Created.Equal(t0) {
		t.Fatalf("CheckVersion: %+v, %v", v, err)
	}
	v.Digest = digestN("f")
	if _, _, err := h.Service.CheckVersion(ctx, v); !errors.Is(err, bundle.ErrDigestMismatch) || !strings.Contains(err.Error(), "the bundle at "+dir+" has manifest digest "+digest+" now") {
		t.Errorf("changed bundle: %v", err)
	}
	if err := os.Remove(filepath.Join(dir, bundle.ManifestName)); err != nil {
		t.Fatal(err)
	}
	_, _, err = h.Service.CheckVersion(ctx, v)
	if !errors.Is(err, bundle.ErrNoManifest) || service.Classify(err).ExitCode != service.ExitFailed ||
		err.Error() != "cannot roll back site to w.today@2026-06-19T12:00:00Z "+digest[:19]+": its bundle "+dir+" is gone (no manifest.json): restore it there, or give --bundle with the location of a copy" {
		t.Errorf("gone bundle: %v", err)
	}
}

// A roll back's request and event ask for allow_older on its destination
// only; its published result names the bundle and what it rolled back to,
// a producer's event cannot claim to be one.
func TestRollbackResult(t *testing.T) {
	t.Parallel()
	v := service.Version{PipelineID: pipeA, DestinationID: "site", Bundle: "/b/v1", Digest: digestN("a"), EventID: "e0.site"}
	req := v.Request("rollback.1")
	if !req.AllowOlder || req.RollbackOf != "e0.site" || req.ManifestDigest != v.Digest || len(req.Destinations) != 1 || req.Destinations[0] != "site" {
		t.Fatalf("request %+v", req)
	}
	if ev := v.Event("r1"); !ev.AllowOlder || ev.RollbackOf != "e0.site" || ev.Validate() != nil || service.RequestFor(ev).RollbackOf != "e0.site" {
		t.Fatalf("event %+v", ev)
	}
	res := engine.Result{Plan: planner.Plan{}}
	r := service.ResultEvent("site", res, nil, req.Direct(v.Digest))
	if r.Type != events.TypePublished || r.Bundle != "/b/v1" || r.RollbackOf != "e0.site" {
		t.Errorf("published result %+v", r)
	}
	producer := req.Direct(v.Digest)
	producer.Event.AllowOlder = false
	if r := service.ResultEvent("site", res, nil, producer); r.RollbackOf != "" || r.Bundle != "/b/v1" {
		t.Errorf("result of a producer's event with rollback_of: %+v", r)
	}
	lost := &engine.SupersededError{Source: bundleSource(digestN("a")), By: bundleSource(digestN("b"))}
	if r := service.ResultEvent("site", res, lost, producer); r.Type != events.TypeSuperseded || r.Bundle != "/b/v1" || r.Source == nil || r.Source.Digest != digestN("a") {
		t.Errorf("superseded result %+v", r)
	}
}

func bundleSource(digest string) catalog.Source {
	return catalog.Source{ID: "w.today", Digest: digest, Created: t0}
}
