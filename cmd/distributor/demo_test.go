package main

import (
	"bytes"
	"context"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestDemo(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var stdout, stderr bytes.Buffer
	start := time.Now()
	code := run(ctx, []string{"demo", "--keep", dir}, &stdout, &stderr)
	t.Logf("demo took %s", time.Since(start).Round(time.Millisecond))
	out := stdout.String()
	if code != 0 {
		t.Fatalf("demo: exit %d\nstdout:\n%s\nstderr:\n%s", code, out, stderr.String())
	}
	if stderr.Len() != 0 {
		t.Errorf("demo wrote to stderr at the default log level:\n%s", stderr.String())
	}

	// The story in order: the collision, the fix, the replay, its publication.
	steps := []string{
		"==> bundle 1: a report and a forecast",
		"published  latest-html      weatherreporter.daily    written 5, unchanged 0, deleted 0",
		"published  weather-archive  weatherreporter.daily    written 2, unchanged 0, deleted 1",
		"    - data/forecast.csv",
		"collision  latest-html      weatherreporter.daily    blocked by unmanaged tomorrow/data/radar.png",
		"the collision blocked latest-html entirely (nothing written there); the archive was published",
		"==> the operator removes the stray file and replays the collision",
		".replay.1: pipeline weatherreporter.daily, bundle " + filepath.Join(dir, "bundles", "run-3") + ", seq 4\n",
		"published  latest-html      weatherreporter.daily    written 5, unchanged 0, deleted 0",
		"    + tomorrow/data/radar.png",
		"done: 3 bundles published, 1 collision, 1 replay.",
	}
	at := 0
	for _, s := range steps {
		i := strings.Index(out[at:], s)
		if i < 0 {
			t.Fatalf("demo output lacks %q after offset %d:\n%s", s, at, out)
		}
		at += i + len(s)
	}
	if n := regexp.MustCompile(`(?m)^\d{4}-\S+Z\s+collision `).FindAllString(out, -1); len(n) != 1 {
		t.Errorf("demo printed %d collision events, want 1", len(n))
	}

	// --keep leaves the result on disk.
	if got := readFile(t, filepath.Join(dir, "latest", "tomorrow", "data", "radar.png")); got != "PNG…" {
		t.Errorf("latest/tomorrow/data/radar.png = %q after the replay, want the bundle's bytes", got)
	}
	if got := catalogPaths(t, filepath.Join(dir, "archive")); !slices.Equal(got, []string{"data/forecast.md", "data/radar.png", "report.md"}) {
		t.Errorf("archive catalog %v", got)
	}
	latest := catalogPaths(t, filepath.Join(dir, "latest"))
	if !slices.Contains(latest, "tomorrow/data/radar.png") || !slices.Contains(latest, "tomorrow/data/forecast.csv") || len(latest) != 7 {
		t.Errorf("latest catalog %v: want 7 outputs incl. the replayed radar.png and the kept forecast.csv", latest)
	}
}
