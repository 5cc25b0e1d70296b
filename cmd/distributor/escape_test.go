package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/distributor/distributor/catalog"
	"github.com/distributor/distributor/events"
)

// escapeControl renders control characters and bytes that are not UTF-8
// as Go escapes; everything else, backslashes and other scripts too, stays.
func TestEscapeControl(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ in, want string }{
		{"", ""},
		{"weatherreporter.today", "weatherreporter.today"},
		{"/srv/bundles/b 1/ünïcode", "/srv/bundles/b 1/ünïcode"},
		{`C:\bundles\b1`, `C:\bundles\b1`},
		{"src\x1b]0;owned\a", `src\x1b]0;owned\a`},
		{"a\nb\tc\rd", `a\nb\tc\rd`},
		{"del\x7f", `del\x7f`},
		{"c1\u009b2J", `c1\u009b2J`},
		{"bad\xffutf8", `bad\xffutf8`},
		{"nul\x00", `nul\x00`},
		{"\ufffd stays", "\ufffd stays"},
	} {
		if got := escapeControl(tc.in); got != tc.want {
			t.Errorf("escapeControl(%q) = %q, want %q", tc.in, got, tc.want)
		}
		if again := escapeControl(escapeControl(tc.in)); again != tc.want {
			t.Errorf("escapeControl twice (%q) = %q, want %q", tc.in, again, tc.want)
		}
	}
}

// Rule: what history, events tail and status print from events reaches the
// terminal with its control characters escaped: a producer's `ESC ]0;…` in
// a source id, a bundle location or a message is shown, not obeyed. The
// JSON forms stay JSON (encoding/json escapes them).
func TestHistoryAndEventsTailEscapeControlCharacters(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := newNATSEnv(t)
	streams, err := events.Setup(ctx, e.nats.JetStream(t), events.SetupConfig{})
	if err != nil {
		t.Fatal(err)
	}
	at := time.Date(2026, 6, 19, 12, 0, 0, 0, time.UTC)
	const digest = "sha256:2c26b46b68ffc68ff99b453c1d30413413422d706483bfa0f98a5e886266e7ae"
	res := events.Result{SchemaVersion: 1, Type: events.TypeFailed, ID: "ev1.d1", Time: at, BundleEventID: "ev1",
		DestinationID: "d1", PipelineID: "p.one", Bundle: "/srv/b\x1b]0;owned\a",
		Source: &events.SourceRef{ID: "src\x1b[2J", Digest: digest, Created: at},
		Reason: events.ReasonContentMismatch, Message: "bundle /srv/b\x1b]0;owned\a: \"a.txt\" damaged\n\x1b[31m"}
	if _, err := events.NewPublisher(e.nats.JetStream(t), streams.Subjects).PublishResult(ctx, res); err != nil {
		t.Fatal(err)
	}

	code, out, stderr := e.cmd(t, "history", "--destination", "d1")
	want := table("", []string{"TIME", "TYPE", "PIPELINE", "SOURCE", "BUNDLE", "RESULT", "EVENT"},
		[]string{catalog.FormatTime(at), "failed", "p.one", `src\x1b[2J@` + catalog.FormatTime(at) + " sha256:2c26b46b68ff", `/srv/b\x1b]0;owned\a`,
			"failed: content_mismatch", "ev1.d1"})
	if code != 0 || out != want {
		t.Errorf("history: exit %d, stderr %q\n got %q\nwant %q", code, stderr, out, want)
	}

	code, out, stderr = e.cmd(t, "events", "tail")
	want = `2026-06-19T12:00:00Z  failed     d1               p.one                    content_mismatch: bundle /srv/b\x1b]0;owned\a: "a.txt" damaged\n\x1b[31m` + "\n"
	if code != 0 || out != want {
		t.Errorf("events tail: exit %d, stderr %q\n got %q\nwant %q", code, stderr, out, want)
	}

	code, out, stderr = e.cmd(t, "status", "--destination", "d1")
	want = "  last failure: " + catalog.FormatTime(at) + ` p.one src\x1b[2J@` + catalog.FormatTime(at) + ` sha256:2c26b46b68ff from /srv/b\x1b]0;owned\a: failed: content_mismatch (bundle /srv/b\x1b]0;owned\a: "a.txt" damaged\n\x1b[31m) (event ev1.d1)` + "\n"
	if code != 0 || !strings.HasSuffix(out, want) || strings.ContainsAny(out, "\x1b\a") {
		t.Errorf("status: exit %d, stderr %q\n got %q\nwant it to end with %q", code, stderr, out, want)
	}

	for _, args := range [][]string{{"history", "--destination", "d1", "--json"}, {"events", "tail", "--json"}, {"status", "--destination", "d1", "--json"}} {
		code, out, _ := e.cmd(t, args...)
		if code != 0 || strings.ContainsAny(out, "\x1b\a") || !strings.Contains(out, `/srv/b\u001b]0;owned\u0007`) {
			t.Errorf("%v: exit %d, want JSON with the escapes of encoding/json:\n%q", args, code, out)
		}
	}
}

// Rule: catalog show prints a record's source id and path with their
// control characters escaped; --json stays JSON.
func TestCatalogShowEscapesControlCharacters(t *testing.T) {
	t.Parallel()
	e := newCLIEnv(t)
	root := e.root("site")
	e.oneDest(pipeDaily, destSpec{ID: "latest", Root: root, Workflow: "replacement"})
	b := e.bundle("b1", "weatherreporter.today", map[string]string{"a.txt": "a\n"})
	e.apply(pipeDaily, b)

	// A catalog written by an older distributor, which took any id.
	name := filepath.Join(root, catalog.FileName)
	data, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	data = []byte(strings.ReplaceAll(string(data), `"id": "weatherreporter.today"`, `"id": "weatherreporter.today\u001b]0;owned\u0007"`))
	if err := os.WriteFile(name, data, 0o644); err != nil {
		t.Fatal(err)
	}
	cat := readCatalog(t, root)
	if len(cat.Outputs) != 1 || cat.Outputs[0].Source.ID != "weatherreporter.today\x1b]0;owned\a" {
		t.Fatalf("the edited catalog reads %+v", cat.Outputs)
	}
	o := cat.Outputs[0]
	out, errOut, code := e.run("catalog", "show", "--destination", "latest")
	want := table("", []string{"PATH", "PIPELINE", "DESTINATION", "KIND", "SIZE", "UPDATED", "SOURCE"},
		[]string{"a.txt", pipeDaily, "latest", "source", "2", catalog.FormatTime(o.UpdatedAt),
			`weatherreporter.today\x1b]0;owned\a@` + catalog.FormatTime(o.Source.Created) + " " + o.Source.Digest[:len("sha256:")+12]}) +
		"1 of 1 output(s); catalog updated " + catalog.FormatTime(cat.UpdatedAt) + "\n"
	if code != 0 || out != want {
		t.Errorf("catalog show: exit %d, stderr %q\n got %q\nwant %q", code, errOut, out, want)
	}
	out, _, code = e.run("catalog", "show", "--destination", "latest", "--json")
	if code != 0 || strings.ContainsAny(out, "\x1b\a") || !strings.Contains(out, `weatherreporter.today\u001b]0;owned\u0007`) {
		t.Errorf("catalog show --json: exit %d, want JSON with the escapes of encoding/json:\n%s", code, out)
	}
}
