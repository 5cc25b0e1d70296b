package consumer_test

import (
	"context"
	"errors"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"maps"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/distributor/distributor/bundle"
	"github.com/distributor/distributor/catalog"
	"github.com/distributor/distributor/config"
	"github.com/distributor/distributor/engine"
	"github.com/distributor/distributor/events"
	"github.com/distributor/distributor/planner"
	"github.com/distributor/distributor/service"
	"github.com/distributor/distributor/storage"
	"github.com/distributor/distributor/testenv"
	"github.com/distributor/distributor/testenv/schematest"
)

// TestResultEventsMatchSchemas builds a result of every type and every
// failure reason with the constructor serve and apply use, publishes each
// through the real publisher and validates what lands in the events stream
// against docs/schema.
func TestResultEventsMatchSchemas(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	schemas := schematest.New(t)
	n := testenv.NewNATS(t)
	js := n.JetStream(t)
	subjects := events.Subjects{}
	if _, err := events.Setup(ctx, js, events.SetupConfig{Subjects: subjects}); err != nil {
		t.Fatal(err)
	}
	pub := events.NewPublisher(js, subjects)
	small := events.NewPublisher(js, subjects, events.WithMaxResultBytes(1500))

	created := time.Date(2026, 6, 19, 12, 0, 0, 0, time.UTC)
	src := catalog.Source{ID: "weather.tomorrow", Digest: "sha256:" + strings.Repeat("1", 64), Created: created}
	newer := catalog.Source{ID: "weather.tomorrow", Digest: "sha256:" + strings.Repeat("2", 64), Created: created.Add(time.Hour)}
	rec := func(path string, size int64, url string) catalog.Output {
		return catalog.Output{Path: path, PipelineID: "weather.daily", DestinationID: "site", Source: src, Kind: catalog.KindSource,
			SHA256: "sha256:" + strings.Repeat("a", 64), Size: size, CreatedAt: created, UpdatedAt: created, URL: url}
	}
	ev := func(id string) events.BundleReady {
		return events.BundleReady{SchemaVersion: events.SchemaVersion, Type: events.TypeBundleReady, ID: id,
			PipelineID: "weather.daily", Bundle: "s3://bundles/run-1/", ManifestDigest: src.Digest, ProducedAt: created}
	}
	admin := ev("e-admin")
	admin.TakeOwnership, admin.AllowOlder, admin.ReplayOf, admin.Destinations = true, true, "e-1.site.collision", []string{"site"}

	published := engine.Result{
		Plan: planner.Plan{Items: []planner.Item{
			{Path: "old.csv", Action: planner.Delete, Record: rec("old.csv", 3, "")},
			{Path: "report.md", Action: planner.Create, Write: true, Record: rec("report.md", 12, "https://example.com/w/report.md")},
		}},
		Written:   []planner.Item{{Path: "report.md", Record: rec("report.md", 12, "https://example.com/w/report.md"), Adopted: true}, {Path: "empty.txt", Record: rec("empty.txt", 0, "")}},
		Updated:   []planner.Item{{Path: "same.csv", Record: rec("same.csv", 5, "")}},
		Deleted:   []string{"old.csv"},
		Unchanged: 4,
	}
	// Too many outputs, or collisions, for a small size limit: cut lists.
	many, manyCollisions := engine.Result{}, engine.Result{}
	for i := range 200 {
		p := fmt.Sprintf("data/file-%03d.csv", i)
		many.Written = append(many.Written, planner.Item{Path: p, Record: rec(p, int64(i+1), "")})
		manyCollisions.Plan.Collisions = append(manyCollisions.Plan.Collisions, p)
	}
	var results []events.Result
	add := func(p *events.Publisher, r events.Result) {
		t.Helper()
		if _, err := p.PublishResult(ctx, r); err != nil {
			t.Fatalf("publish %s: %v", r.Type, err)
		}
		results = append(results, r)
	}
	add(pub, service.ResultEvent("site", published, nil, service.Delivery{Event: ev("e-pub"), Attempt: 1}))
	add(pub, service.ResultEvent("site", published, nil, service.Delivery{Event: admin, Attempt: 2}))
	add(pub, service.ResultEvent("site", engine.Result{}, nil, service.Delivery{Event: ev("e-empty"), Attempt: 1}))
	add(small, service.ResultEvent("site", many, nil, service.Delivery{Event: ev("e-many"), Attempt: 1}))
	add(pub, service.ResultEvent("site", engine.Result{},
		&engine.SupersededError{Root: "/srv/site", Owner: catalog.Owner{PipelineID: "weather.daily", DestinationID: "site"}, Source: src, By: newer},
		service.Delivery{Event: ev("e-old"), Attempt: 1}))
	collided := engine.Result{Plan: planner.Plan{Collisions: []string{"report.md"}, Items: []planner.Item{
		{Path: "report.md", Action: planner.Collision, Record: rec("report.md", 12, "")}}}}
	add(pub, service.ResultEvent("site", collided, fmt.Errorf("%w in /srv/site: 1 planned path(s) blocked", engine.ErrCollision), service.Delivery{Event: ev("e-col"), Attempt: 1}))
	add(small, service.ResultEvent("site", manyCollisions, fmt.Errorf("%w in /srv/site: 200 planned path(s) blocked", engine.ErrCollision), service.Delivery{Event: ev("e-col-many"), Attempt: 1}))

	// One failure per reason, with the error that leads to it.
	failures := []struct {
		err       error
		dest      string
		exhausted bool
		reason    string
	}{
		{fmt.Errorf("manifest: %w", bundle.ErrInvalidManifest), "site", false, events.ReasonInvalidEvent},
		{fmt.Errorf("%w \"nope\"", service.ErrUnknownPipeline), "", false, events.ReasonUnknownPipeline},
		{fmt.Errorf("%w \"nope\"", service.ErrUnknownDestination), "", false, events.ReasonUnknownDestination},
		{fmt.Errorf("s3://bundles/run-1/: %w", bundle.ErrNoManifest), "site", false, events.ReasonBundleMissing},
		{bundle.ErrDigestMismatch, "site", false, events.ReasonDigestMismatch},
		{bundle.ErrContentMismatch, "site", false, events.ReasonContentMismatch},
		{catalog.ErrInvalid, "site", false, events.ReasonInvalidCatalog},
		{catalog.ErrNewer, "site", false, events.ReasonNewerCatalog},
		{planner.ErrTooManyDeletes, "site", false, events.ReasonRefused},
		{storage.ErrUnavailable, "site", true, events.ReasonMaxDeliveries},
		{storage.ErrConflict, "site", false, events.ReasonStorage},
		{fmt.Errorf("/srv/site: %w", storage.ErrRootMissing), "site", false, events.ReasonRootMissing},
		{fmt.Errorf("/srv/site: %w", storage.ErrDenied), "site", false, events.ReasonStorageDenied},
		{fmt.Errorf("%w: bundle /srv/other/b1 of pipeline \"weather.daily\" lies outside them", config.ErrBundleNotAllowed), "site", false, events.ReasonBundleNotAllowed},
		{fmt.Errorf("bundle /b: %w: created 2099-01-01T00:00:00Z", bundle.ErrFutureCreated), "site", false, events.ReasonInvalidBundle},
		{errors.New("boom"), "site", false, events.ReasonInternal},
	}
	for i, f := range failures {
		r := service.ResultEvent(f.dest, published, f.err, service.Delivery{Event: ev("e-fail-" + strconv.Itoa(i)), Attempt: 5, Exhausted: f.exhausted})
		if r.Reason != f.reason {
			t.Fatalf("%v: reason %q, want %q", f.err, r.Reason, f.reason)
		}
		add(pub, r)
	}
	// An undecodable bundle-ready event (built as Handle does).
	add(pub, events.Result{Type: events.TypeFailed, ID: "invalid.DISTRIBUTOR_BUNDLES.7", Reason: events.ReasonInvalidEvent,
		Message: "invalid event: bundle.ready: invalid character 'x'", Attempts: 1})
	// Maintenance results, built as prune and reconcile-state build them.
	add(pub, events.Result{ID: events.NewEventID(), Type: events.TypePruned, PipelineID: "weather.daily", DestinationID: "site", Deleted: 1,
		Outputs: []events.OutputRef{{Path: "old.csv", SHA256: "sha256:" + strings.Repeat("a", 64), Size: 3, Action: events.ActionDeleted}}})
	add(pub, events.Result{ID: events.NewEventID(), Type: events.TypeReconciled, DestinationID: "site", Removed: 1, SizeMismatches: []string{"big.csv"},
		Outputs: []events.OutputRef{{Path: "gone.csv", SHA256: "sha256:" + strings.Repeat("a", 64), Size: 3, URL: "https://example.com/w/gone.csv", Action: events.ActionDeleted}}})

	got := schemas.CheckEventsStream(t, js, subjects)
	if len(got) != len(results) {
		t.Fatalf("%d events in the stream, want %d", len(got), len(results))
	}
	types, reasons := map[string]bool{}, map[string]bool{}
	truncated := map[string]bool{}
	for _, e := range got {
		types[e.Result.Type] = true
		if e.Result.Reason != "" {
			reasons[e.Result.Reason] = true
		}
		if e.Result.OutputsTruncated {
			truncated["outputs"] = true
		}
		if e.Result.ListsTruncated {
			truncated["lists"] = true
		}
	}
	for _, typ := range []string{events.TypePublished, events.TypeSuperseded, events.TypeCollision, events.TypeFailed, events.TypePruned, events.TypeReconciled} {
		if !types[typ] {
			t.Errorf("no %s event was checked", typ)
		}
	}
	if !truncated["outputs"] || !truncated["lists"] {
		t.Errorf("truncated events checked: %v, want outputs and lists", truncated)
	}
	want := reasonConstants(t)
	if have := slices.Sorted(maps.Keys(reasons)); !slices.Equal(have, want) {
		t.Errorf("reasons checked %v, want every Reason constant of events/events.go %v", have, want)
	}
	enum := schemas.Raw(t, "failed.json")["properties"].(map[string]any)["reason"].(map[string]any)["enum"].([]any)
	var inSchema []string
	for _, v := range enum {
		inSchema = append(inSchema, v.(string))
	}
	if slices.Sort(inSchema); !slices.Equal(inSchema, want) {
		t.Errorf("docs/schema/failed.json reason enum %v, want the Reason constants %v", inSchema, want)
	}
}

// reasonConstants are the values of the Reason* constants in events/events.go,
// read from the source so that a new reason cannot be missed.
func reasonConstants(t *testing.T) []string {
	t.Helper()
	f, err := parser.ParseFile(token.NewFileSet(), filepath.Join("..", "events", "events.go"), nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, d := range f.Decls {
		g, ok := d.(*ast.GenDecl)
		if !ok || g.Tok != token.CONST {
			continue
		}
		for _, s := range g.Specs {
			vs := s.(*ast.ValueSpec)
			for i, name := range vs.Names {
				if strings.HasPrefix(name.Name, "Reason") && i < len(vs.Values) {
					if lit, ok := vs.Values[i].(*ast.BasicLit); ok {
						v, _ := strconv.Unquote(lit.Value)
						out = append(out, v)
					}
				}
			}
		}
	}
	slices.Sort(out)
	if len(out) == 0 {
		t.Fatal("no Reason constants found in events/events.go")
	}
	return out
}
