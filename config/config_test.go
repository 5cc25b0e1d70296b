package config

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/distributor/distributor/planner"
)

func TestParseDesignExample(t *testing.T) {
	data, err := os.ReadFile("testdata/design.yaml")
	if err != nil {
		t.Fatal(err)
	}
	got, err := Parse(data, "testdata/design.yaml")
	if err != nil {
		t.Fatal(err)
	}
	abs, err := filepath.Abs("testdata")
	if err != nil {
		t.Fatal(err)
	}
	want := &Config{
		File: "testdata/design.yaml",
		NATS: NATS{
			URL:           "nats://127.0.0.1:4222",
			Listen:        "127.0.0.1:4222",
			StoreDir:      filepath.Join(abs, ".distributor/nats"),
			SubjectPrefix: "distributor",
			BundleMaxAge:  Duration(7 * 24 * time.Hour),
			EventMaxAge:   Duration(30 * 24 * time.Hour),
			Replicas:      1,
			MaxDeliveries: 5,
			RedeliveryBackoff: []Duration{Duration(time.Second), Duration(5 * time.Second), Duration(15 * time.Second),
				Duration(30 * time.Second), Duration(time.Minute)},
		},
		HTTP:                   HTTP{Listen: "127.0.0.1:9090"},
		PublicationTimeout:     DefaultPublicationTimeout,
		DestinationParallelism: DefaultDestinationParallelism,
		MaxClockSkew:           Duration(5 * time.Minute),
		Pipelines:              []Pipeline{{ID: "weatherreporter.daily", Destinations: []string{"latest-html", "weather-archive"}}},
		Destinations: []Destination{
			{
				ID: "latest-html", Backend: "local", Path: "/srv/reports/weather/latest",
				Workflow:   planner.Additive,
				Layout:     Layout{Prefix: "{source_name}/"},
				Publish:    Publish{Sources: true, HTML: true, Include: []string{"**"}},
				Transforms: []Transform{{Name: "markdown_to_html", Match: "**/*.md", Index: "report.md"}},
				Links:      Links{BaseURL: "https://reports.example.com/weather/", Pretty: true},
				Retention:  Retention{MaxAge: Duration(720 * time.Hour)},
				MaxDeletes: 1000,
			},
			{
				ID: "weather-archive", Backend: "s3", Bucket: "reports", Path: "weather/archive/", Region: "us-east-1",
				Workflow: planner.Replacement,
				Publish:  Publish{Sources: true, HTML: true, Include: []string{"**"}},
			},
		},
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("Parse:\n got %+v\nwant %+v", got, want)
	}
	if p, ok := got.Pipeline("weatherreporter.daily"); !ok || p.Destinations[1] != "weather-archive" {
		t.Fatalf("Pipeline lookup = %+v, %v", p, ok)
	}
	if _, ok := got.Pipeline("nope"); ok {
		t.Fatal("Pipeline(nope) found")
	}
	if d, ok := got.Destination("weather-archive"); !ok || d.Bucket != "reports" {
		t.Fatalf("Destination lookup = %+v, %v", d, ok)
	}
	if _, ok := got.Destination("nope"); ok {
		t.Fatal("Destination(nope) found")
	}
}

func TestDefaults(t *testing.T) {
	c, err := Parse([]byte(`
s3: {region: eu-west-1, endpoint: "http://127.0.0.1:9000", path_style: true}
destinations:
  - {id: l, backend: local, path: /srv/l}
  - {id: s, backend: s3, bucket: b}
  - {id: own, backend: s3, bucket: b2, region: us-east-2, endpoint: "https://s3.example.com", path_style: false}
  - id: t
    backend: local
    path: /srv/t
    layout: {prefix: ""}
    publish: {sources: false, include: ["*.md"], exclude: ["drafts/**"]}
    transforms: [{name: markdown_to_html}]
    links: {base_url: "https://x.example/reports"}
`), "")
	if err != nil {
		t.Fatal(err)
	}
	wantNATS := NATS{Listen: "127.0.0.1:4222", StoreDir: ".distributor/nats", SubjectPrefix: "distributor",
		BundleMaxAge: Duration(7 * 24 * time.Hour), EventMaxAge: Duration(30 * 24 * time.Hour), Replicas: 1,
		MaxDeliveries: 5, RedeliveryBackoff: []Duration{Duration(time.Second), Duration(5 * time.Second),
			Duration(15 * time.Second), Duration(30 * time.Second), Duration(time.Minute)}}
	if !reflect.DeepEqual(c.NATS, wantNATS) {
		t.Errorf("NATS = %+v, want %+v", c.NATS, wantNATS)
	}
	if got := c.NATS.ConnectURL(); got != "nats://127.0.0.1:4222" {
		t.Errorf("ConnectURL = %q", got)
	}
	if c.HTTP.Listen != "127.0.0.1:9090" {
		t.Errorf("HTTP.Listen = %q, want the default 127.0.0.1:9090", c.HTTP.Listen)
	}
	defPublish := Publish{Sources: true, HTML: true, Include: []string{"**"}}
	want := []Destination{
		{ID: "l", Backend: "local", Path: "/srv/l", Workflow: planner.Additive, Publish: defPublish},
		{ID: "s", Backend: "s3", Bucket: "b", Region: "eu-west-1", Endpoint: "http://127.0.0.1:9000", PathStyle: true,
			Workflow: planner.Additive, Publish: defPublish},
		{ID: "own", Backend: "s3", Bucket: "b2", Region: "us-east-2", Endpoint: "https://s3.example.com", PathStyle: false,
			Workflow: planner.Additive, Publish: defPublish},
		{ID: "t", Backend: "local", Path: "/srv/t", Workflow: planner.Additive, Layout: Layout{Prefix: ""},
			Publish:    Publish{Sources: false, HTML: true, Include: []string{"*.md"}, Exclude: []string{"drafts/**"}},
			Transforms: []Transform{{Name: "markdown_to_html", Match: "**/*.md"}},
			Links:      Links{BaseURL: "https://x.example/reports/"}},
	}
	if !reflect.DeepEqual(c.Destinations, want) {
		t.Errorf("Destinations:\n got %+v\nwant %+v", c.Destinations, want)
	}

	// An empty file is a valid configuration of defaults only.
	c, err = Parse(nil, "")
	if err != nil || c.NATS.SubjectPrefix != "distributor" || len(c.Destinations) != 0 {
		t.Fatalf("Parse(empty) = %+v, %v", c, err)
	}
	for _, listen := range []string{"off", "0.0.0.0:9100", ":0"} {
		c, err = Parse([]byte("http:\n  listen: \""+listen+"\"\n"), "")
		if err != nil || c.HTTP.Listen != listen {
			t.Errorf("http.listen %q: got %+v, %v", listen, c.HTTP, err)
		}
	}
	// Explicit zero ages mean "no limit" and are kept.
	c, err = Parse([]byte("nats: {bundle_max_age: 0s, event_max_age: 0}\n"), "")
	if err != nil || c.NATS.BundleMaxAge != 0 || c.NATS.EventMaxAge != 0 {
		t.Fatalf("zero ages = %+v, %v", c.NATS, err)
	}
}

// validDest is a valid destinations section; error cases append to it.
const validDest = `destinations:
  - id: a
    backend: local
    path: /srv/a
`

func TestParseErrors(t *testing.T) {
	tests := []struct {
		name, yaml, want string
	}{
		{"unknown key", `pipelines:
  - id: p
    destinations: [a]
destinations:
  - id: a
    backend: local
    path: /tmp/a
  - id: b
    backend: local
    path: /tmp/b
    workflw: additive
`, `config.yaml:11: unknown key "workflw" in destinations[1]: did you mean "workflow"?`},
		{"unknown top-level key", "nats: {}\nfoo: 1\n", `config.yaml:2: unknown key "foo" at the top level`},
		{"unknown nested key", "nats:\n  tls: {ca: x, crt: y}\n", `config.yaml:2: unknown key "crt" in nats.tls: did you mean "cert"?`},
		{"unknown publish key", validDest + "    publish: {html: true, markdown: true}\n", `config.yaml:5: unknown key "markdown" in destinations[0].publish`},
		{"legacy state", `destinations:
  - id: latest-html
    backend: local
    path: /srv/a
    state: managed
`, `config.yaml:5: destinations[0] (latest-html): "state" is a legacy policy key and is no longer supported; set "workflow: replacement" or "workflow: additive" instead`},
		{"legacy beats an earlier unknown key", `destinations:
  - id: x
    bogus: 1
    backend: local
    path: /srv/a
    reconciliation: {mode: strict}
`, `config.yaml:6: destinations[0] (x): "reconciliation" is a legacy policy key and is no longer supported; set "workflow: replacement" or "workflow: additive" instead`},
		{"legacy nested", validDest + "    publish:\n      takeover: true\n", `config.yaml:6: destinations[0] (a): "takeover" is a legacy policy key and is no longer supported; set "workflow: replacement" or "workflow: additive" instead`},
		{"legacy transfer without id", "destinations:\n  - transfer: {}\n", `config.yaml:2: destinations[0]: "transfer" is a legacy policy key and is no longer supported; set "workflow: replacement" or "workflow: additive" instead`},
		{"yaml syntax", "destinations:\n  - id: a\n   backend: local\n", `config.yaml:1: invalid YAML: did not find expected '-' indicator`},
		{"not a mapping", "- a\n- b\n", `config.yaml:1: the configuration must be a mapping, got a list`},
		{"two documents", "nats: {}\n---\nnats: {}\n", `config.yaml:2: a second YAML document (---) follows: put the whole configuration in one document`},
		{"duplicate key", "nats:\n  url: nats://x:1\n  url: nats://x:2\n", `config.yaml:3: duplicate key "url" in nats: keep one`},
		{"wrong type list", "pipelines: {id: p}\n", `config.yaml:1: pipelines must be a list, got a mapping`},
		{"wrong type string", validDest + "    bucket: [x]\n", `config.yaml:5: destinations[0] (a): bucket must be a string, got a list`},
		{"wrong type bool", validDest + "    publish: {sources: yes}\n", `config.yaml:5: destinations[0] (a): publish.sources must be true or false, got "yes"`},
		{"wrong type int", validDest + "    max_deletes: lots\n", `config.yaml:5: destinations[0] (a): max_deletes must be a whole number, got "lots"`},
		{"wrong type list item", validDest + "    publish: {include: [[x]]}\n", `config.yaml:5: destinations[0] (a): publish.include[0] must be a string, got a list`},

		{"pipeline id missing", "pipelines:\n  - destinations: [a]\n" + validDest, `config.yaml:2: pipelines[0]: id is missing: set the producer's pipeline id, e.g. "weatherreporter.daily"`},
		{"pipeline id bad char", "pipelines:\n  - {id: weather/daily, destinations: [a]}\n" + validDest, `config.yaml:2: pipelines[0] (weather/daily): id "weather/daily" has '/': ids may use only letters, digits, '.', '_' and '-'`},
		{"pipeline id empty token", "pipelines:\n  - {id: weather..daily, destinations: [a]}\n" + validDest, `config.yaml:2: pipelines[0] (weather..daily): id "weather..daily" must not start or end with '.' or contain ".." (it becomes NATS subject tokens)`},
		{"pipeline id duplicate", "pipelines:\n  - {id: p, destinations: [a]}\n  - {id: p, destinations: [a]}\n" + validDest, `config.yaml:3: pipelines[1] (p): duplicate pipeline id "p" (also pipelines[0]): ids must be unique`},
		{"pipeline unknown destination", "pipelines:\n  - id: p\n    destinations:\n      - a\n      - archive\n" + validDest, `config.yaml:5: pipelines[0] (p): unknown destination "archive": define it under destinations or remove it`},
		{"pipeline destination twice", "pipelines:\n  - {id: p, destinations: [a, a]}\n" + validDest, `config.yaml:2: pipelines[0] (p): destination "a" is listed twice: remove one`},
		{"pipeline without destinations", "pipelines:\n  - id: p\n" + validDest, `config.yaml:2: pipelines[0] (p): no destinations: list at least one destination id under destinations`},
		{"pipeline empty destinations", "pipelines:\n  - {id: p, destinations: []}\n" + validDest, `config.yaml:2: pipelines[0] (p): no destinations: list at least one destination id under destinations`},

		{"destination id missing", "destinations:\n  - backend: local\n    path: /x\n", `config.yaml:2: destinations[0]: id is missing: give the destination a unique id, e.g. "latest-html"`},
		{"destination id bad char", "destinations:\n  - {id: 'my dest', backend: local, path: /x}\n", `config.yaml:2: destinations[0] (my dest): id "my dest" has ' ': ids may use only letters, digits, '.', '_' and '-'`},
		{"destination id with dot", "destinations:\n  - {id: a.b, backend: local, path: /x}\n", `config.yaml:2: destinations[0] (a.b): id "a.b" must not contain '.' (it is one NATS subject token); use '-' or '_'`},
		{"destination id duplicate", validDest + "  - {id: a, backend: local, path: /srv/a}\n", `config.yaml:5: destinations[1] (a): duplicate destination id "a" (also destinations[0]): ids must be unique`},
		{"backend missing", "destinations:\n  - id: a\n    path: /x\n", `config.yaml:2: destinations[0] (a): backend is missing: use "local" or "s3"`},
		{"backend unknown", "destinations:\n  - id: a\n    backend: ftp\n", `config.yaml:3: destinations[0] (a): unknown backend "ftp": use "local" or "s3"`},
		{"local without path", "destinations:\n  - id: a\n    backend: local\n", `config.yaml:2: destinations[0] (a): local destination needs path: the folder to publish into`},
		{"local with null path", "destinations:\n  - id: a\n    backend: local\n    path:\n", `config.yaml:4: destinations[0] (a): local destination needs path: the folder to publish into`},
		{"local with s3 key", validDest + "    bucket: reports\n", `config.yaml:5: destinations[0] (a): bucket is only for s3 destinations: remove it or set backend: s3`},
		{"s3 without bucket", "destinations:\n  - id: a\n    backend: s3\n    path: x/\n", `config.yaml:2: destinations[0] (a): s3 destination needs bucket`},
		{"s3 bucket with prefix", "destinations:\n  - {id: a, backend: s3, bucket: reports/weather}\n", `config.yaml:2: destinations[0] (a): bucket "reports/weather" must be a bare bucket name; put the key prefix in path`},
		{"s3 prefix leading slash", "destinations:\n  - {id: a, backend: s3, bucket: r, path: /weather/}\n", `config.yaml:2: destinations[0] (a): path "/weather/" must not start with "/": it is a key prefix inside the bucket ("" = bucket root)`},
		{"s3 prefix dotdot", "destinations:\n  - id: a\n    backend: s3\n    bucket: r\n    path: weather/../x\n", `config.yaml:5: destinations[0] (a): path "weather/../x/" is not a clean key prefix: invalid path "weather/../x": has a ".." segment`},
		{"s3 bad endpoint", "destinations:\n  - {id: a, backend: s3, bucket: r, endpoint: 'localhost:9000'}\n", `config.yaml:2: destinations[0] (a): endpoint "localhost:9000": must be an http(s) URL like https://s3.example.com`},
		{"nested roots", validDest + "  - id: b\n    backend: local\n    path: /srv/a/b\n", `config.yaml:7: destinations[1] (b): root file:///srv/a/b/ is nested with the root of destinations[0] (a) (file:///srv/a/): destination roots must be the same or not nested`},
		{"nested s3 roots", "destinations:\n  - {id: a, backend: s3, bucket: r, path: x/y/}\n  - {id: b, backend: s3, bucket: r}\n", `config.yaml:3: destinations[1] (b): root s3://r/ is nested with the root of destinations[0] (a) (s3://r/x/y/): destination roots must be the same or not nested`},
		{"nested s3 prefixes", "s3: {endpoint: 'http://s3.local:9000'}\ndestinations:\n  - {id: a, backend: s3, bucket: r, path: x/}\n  - {id: b, backend: s3, bucket: r, path: x/y/}\n", `config.yaml:4: destinations[1] (b): root s3://r/x/y/ is nested with the root of destinations[0] (a) (s3://r/x/): destination roots must be the same or not nested`},
		{"filesystem root", "destinations:\n  - id: a\n    backend: local\n    path: /\n", `config.yaml:4: destinations[0] (a): path "/" is a system folder: give the destination a folder of its own, e.g. "/srv/reports"`},
		{"filesystem root before a nested one", "destinations:\n  - {id: a, backend: local, path: /srv/a}\n  - {id: b, backend: local, path: //}\n", `config.yaml:3: destinations[1] (b): path "/" is a system folder: give the destination a folder of its own, e.g. "/srv/reports"`},
		{"etc", "destinations:\n  - {id: a, backend: local, path: /etc/}\n", `config.yaml:2: destinations[0] (a): path "/etc" is a system folder: give the destination a folder of its own, e.g. "/srv/reports"`},
		{"var after cleaning", "destinations:\n  - {id: a, backend: local, path: /usr/../var}\n", `config.yaml:2: destinations[0] (a): path "/var" is a system folder: give the destination a folder of its own, e.g. "/srv/reports"`},
		{"unknown workflow", validDest + "    workflow: mirror\n", `config.yaml:5: destinations[0] (a): unknown workflow "mirror": use "replacement" or "additive"`},
		{"unknown placeholder", validDest + "    layout: {prefix: \"{src}/\"}\n", `config.yaml:5: destinations[0] (a): layout.prefix "{src}/": unknown placeholder {src}: use {source_id}, {source_name} or {pipeline_id}`},
		{"unclosed placeholder", validDest + "    layout: {prefix: \"{source_name/\"}\n", `config.yaml:5: destinations[0] (a): layout.prefix "{source_name/": has an unclosed "{"`},
		{"absolute layout", validDest + "    layout: {prefix: \"/{source_name}/\"}\n", `config.yaml:5: destinations[0] (a): layout.prefix "/{source_name}/": must not start with "/": it is relative to the destination root ("" = the root itself)`},
		{"reserved layout", validDest + "    layout: {prefix: \".distributor/\"}\n", `config.yaml:5: destinations[0] (a): layout.prefix ".distributor/": is not a relative folder prefix: invalid path ".distributor": reserved for distributor's own state (.distributor.json, .distributor/)`},
		{"bad include glob", validDest + "    publish:\n      include: ['**', '[a']\n", `config.yaml:6: destinations[0] (a): publish.include "[a" is not a valid glob (check brackets and braces)`},
		{"bad exclude glob", validDest + "    publish:\n      exclude: ['{a']\n", `config.yaml:6: destinations[0] (a): publish.exclude "{a" is not a valid glob (check brackets and braces)`},
		{"unknown transform", validDest + "    transforms:\n      - name: pdf\n", `config.yaml:6: destinations[0] (a): transforms[0]: unknown transform "pdf": use "markdown_to_html"`},
		{"transform without name", validDest + "    transforms:\n      - match: '*.md'\n", `config.yaml:6: destinations[0] (a): transforms[0].name is missing: use "markdown_to_html"`},
		{"bad transform glob", validDest + "    transforms:\n      - {name: markdown_to_html, match: '[md'}\n", `config.yaml:6: destinations[0] (a): transforms[0].match "[md" is not a valid glob, e.g. "**/*.md"`},
		{"index outside match", validDest + "    transforms:\n      - {name: markdown_to_html, match: '*.md', index: docs/report.md}\n", `config.yaml:6: destinations[0] (a): transforms[0].index "docs/report.md" does not match transforms[0].match "*.md", so it would never be rendered`},
		{"base_url not http", validDest + "    links: {base_url: 'ftp://x.example/'}\n", `config.yaml:5: destinations[0] (a): links.base_url "ftp://x.example/" must be an absolute http(s) URL like "https://reports.example.com/weather/"`},
		{"base_url relative", validDest + "    links: {base_url: '/weather/'}\n", `config.yaml:5: destinations[0] (a): links.base_url "/weather/" must be an absolute http(s) URL like "https://reports.example.com/weather/"`},
		{"base_url query", validDest + "    links: {base_url: 'https://x.example/?a=1'}\n", `config.yaml:5: destinations[0] (a): links.base_url "https://x.example/?a=1/" must not have a query or fragment: output paths are appended to it`},
		{"bad duration", validDest + "    retention: {max_age: 30days}\n", `config.yaml:5: destinations[0] (a): retention.max_age: invalid duration "30days": use a Go duration like "90m" or "720h", or whole days like "30d"`},
		{"unitless duration", "nats:\n  event_max_age: 3600\n", `config.yaml:2: nats.event_max_age: invalid duration "3600": use a Go duration like "90m" or "720h", or whole days like "30d"`},
		{"negative duration", validDest + "    retention: {max_age: -1h}\n", `config.yaml:5: destinations[0] (a): retention.max_age must not be negative (0 = prune needs --older-than)`},
		{"negative max_deletes", validDest + "    max_deletes: -1\n", `config.yaml:5: destinations[0] (a): max_deletes must be 0 (no limit) or more, got -1`},
		{"bad publish_last glob", validDest + "    publish_last: [\"**/*.css\", \"a[\"]\n", `config.yaml:5: destinations[0] (a): publish_last "a[" is not a valid glob over output paths (check brackets and braces), e.g. "**/*.html"`},
		{"empty publish_last glob", validDest + "    publish_last: [\"\"]\n", `config.yaml:5: destinations[0] (a): publish_last "" is not a valid glob over output paths (check brackets and braces), e.g. "**/*.html"`},
		{"negative retain_previous", validDest + "    retain_previous: -10s\n", `config.yaml:5: destinations[0] (a): retain_previous must not be negative (0 = dropped paths are deleted at once)`},
		{"subject prefix", "nats: {subject_prefix: a.b}\n", `config.yaml:1: nats.subject_prefix "a.b": has '.': use only letters, digits, '_' and '-' (it also names streams and buckets)`},
		{"http listen", "http:\n  listen: 9090\n", `config.yaml:2: http.listen "9090": must be host:port, e.g. "127.0.0.1:9090", or "off"`},
		{"http unknown key", "http:\n  addr: :9090\n", `config.yaml:2: unknown key "addr" in http`},
		{"listen", "nats:\n  listen: localhost\n", `config.yaml:2: nats.listen "localhost" must be host:port, e.g. "127.0.0.1:4222"`},
		{"nats url scheme", "nats:\n  url: http://x:4222\n", `config.yaml:2: nats.url "http://x:4222": server "http://x:4222" has scheme "http": use nats://, tls://, ws:// or wss://`},
		{"tls half", "nats:\n  tls:\n    cert: c.pem\n", `config.yaml:2: nats.tls needs both cert and key for a client certificate, or neither`},
		{"password without user", "nats:\n  password: secret\n", `config.yaml:2: nats.password is set without nats.user: set both or neither`},
		{"two credentials", "nats:\n  token: t\n  user: u\n", `config.yaml:3: nats.token and nats.user are both set: use only one of nats.creds, nats.nkey_seed, nats.token or nats.user/password`},
		{"creds and seed", "nats: {nkey_seed: s.nk, creds: u.creds}\n", `config.yaml:1: nats.creds and nats.nkey_seed are both set: use only one of nats.creds, nats.nkey_seed, nats.token or nats.user/password`},
		{"server tls half", "nats:\n  server_tls: {cert: s.pem}\n", `config.yaml:2: nats.server_tls needs both cert and key (the embedded server's certificate), or neither`},
		{"client ca without cert", "nats:\n  server_tls:\n    client_ca: ca.pem\n", `config.yaml:2: nats.server_tls.client_ca needs cert and key: mutual TLS is TLS first`},
		{"unknown server_tls key", "nats:\n  server_tls: {cert: s.pem, key: k.pem, ca: ca.pem}\n", `config.yaml:2: unknown key "ca" in nats.server_tls`},
		{"nats url credentials redacted", "nats:\n  url: http://u:secret@x:4222\n", `config.yaml:2: nats.url "http://REDACTED@x:4222": server "http://REDACTED@x:4222" has scheme "http": use nats://, tls://, ws:// or wss://`},
		{"s3 default endpoint", "s3:\n  endpoint: minio:9000\n", `config.yaml:2: s3.endpoint "minio:9000": must be an http(s) URL like https://s3.example.com`},
		{"s3 credentials are not config", "s3:\n  access_key_id: x\n", `config.yaml:2: unknown key "access_key_id" in s3`},

		// Only the first problem in file order is reported, whatever its kind.
		{"first in file order: validation before unknown key", validDest + "    workflow: mirror\n    workflw: x\n", `config.yaml:5: destinations[0] (a): unknown workflow "mirror": use "replacement" or "additive"`},
		{"first in file order: unknown key before validation", validDest + "    workflw: x\n    workflow: mirror\n", `config.yaml:5: unknown key "workflw" in destinations[0]: did you mean "workflow"?`},
		{"first in file order: pipelines before destinations", "pipelines:\n  - {id: p, destinations: [zz]}\n" + validDest + "    max_deletes: -3\n", `config.yaml:2: pipelines[0] (p): unknown destination "zz": define it under destinations or remove it`},
		{"first in file order: destinations before pipelines", validDest + "    max_deletes: -3\npipelines:\n  - {id: p, destinations: [zz]}\n", `config.yaml:5: destinations[0] (a): max_deletes must be 0 (no limit) or more, got -3`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := Parse([]byte(tt.yaml), "config.yaml")
			if err == nil {
				t.Fatalf("Parse succeeded: %+v", c)
			}
			if err.Error() != tt.want {
				t.Fatalf("error:\n got %s\nwant %s", err, tt.want)
			}
			if !errors.Is(err, ErrInvalid) {
				t.Fatalf("error %v does not match ErrInvalid", err)
			}
			var ce *Error
			if !errors.As(err, &ce) || ce.Line == 0 {
				t.Fatalf("error %#v has no line", err)
			}
			if strings.Contains(err.Error(), "\n") {
				t.Fatalf("error has several lines: %q", err)
			}
		})
	}
}

func TestParseWithoutFileName(t *testing.T) {
	_, err := Parse([]byte("foo: 1\n"), "")
	if err == nil || err.Error() != `line 1: unknown key "foo" at the top level` {
		t.Fatalf("err = %v", err)
	}
}

func TestValidateBuiltConfig(t *testing.T) {
	c := &Config{
		NATS: NATS{Listen: DefaultListen, StoreDir: "x", SubjectPrefix: "d", Replicas: 1},
		Destinations: []Destination{{ID: "a", Backend: "local", Path: "/srv/a", Workflow: planner.Additive,
			Layout: Layout{Prefix: "{source_id}/"}, MaxDeletes: -2}},
	}
	err := c.Validate()
	if err == nil || err.Error() != "destinations[0] (a): max_deletes must be 0 (no limit) or more, got -2" {
		t.Fatalf("Validate = %v", err)
	}
	c.Destinations[0].MaxDeletes = 0
	c.Destinations[0].Workflow = ""
	err = c.Validate()
	if err == nil || err.Error() != `destinations[0] (a): workflow is missing: use "replacement" or "additive"` {
		t.Fatalf("Validate = %v", err)
	}
	c.Destinations[0].Workflow = planner.Replacement
	if err := c.Validate(); err != nil {
		t.Fatalf("Validate = %v", err)
	}
}

func TestApplyEnv(t *testing.T) {
	const file = `nats: {url: "nats://file:4222", subject_prefix: filep, creds: /etc/file.creds}
s3: {region: eu-west-1, endpoint: "https://file.example"}
destinations:
  - {id: inherit, backend: s3, bucket: b1}
  - {id: own, backend: s3, bucket: b2, region: us-east-2, endpoint: "https://own.example"}
  - {id: loc, backend: local, path: /srv/loc}
`
	env := map[string]string{
		"DISTRIBUTOR_NATS_URL":            "nats://env:4222",
		"DISTRIBUTOR_NATS_SUBJECT_PREFIX": "tenant-b",
		"DISTRIBUTOR_NATS_CREDS":          "/run/secrets/nats.creds",
		"DISTRIBUTOR_S3_ENDPOINT":         "http://127.0.0.1:9000",
		"DISTRIBUTOR_S3_REGION":           "",
	}
	lookup := func(k string) (string, bool) { v, ok := env[k]; return v, ok }
	c, err := Parse([]byte(file), "")
	if err != nil {
		t.Fatal(err)
	}
	if err := c.ApplyEnv(lookup); err != nil {
		t.Fatal(err)
	}
	if c.NATS.URL != "nats://env:4222" || c.NATS.SubjectPrefix != "tenant-b" || c.NATS.CredsFile != "/run/secrets/nats.creds" {
		t.Errorf("NATS = %+v", c.NATS)
	}
	// An empty variable does not override.
	if c.S3 != (S3Defaults{Region: "eu-west-1", Endpoint: "http://127.0.0.1:9000"}) {
		t.Errorf("S3 = %+v", c.S3)
	}
	if d, _ := c.Destination("inherit"); d.Endpoint != "http://127.0.0.1:9000" || d.Region != "eu-west-1" {
		t.Errorf("inherit = %+v", d)
	}
	if d, _ := c.Destination("own"); d.Endpoint != "https://own.example" || d.Region != "us-east-2" {
		t.Errorf("own = %+v", d)
	}
	if d, _ := c.Destination("loc"); d.Endpoint != "" {
		t.Errorf("loc = %+v", d)
	}

	env["DISTRIBUTOR_S3_REGION"] = "ap-south-1"
	if err := c.ApplyEnv(lookup); err != nil {
		t.Fatal(err)
	}
	if d, _ := c.Destination("inherit"); d.Region != "ap-south-1" {
		t.Errorf("inherit region = %q", d.Region)
	}

	bad := []struct{ k, v, want string }{
		{"DISTRIBUTOR_NATS_SUBJECT_PREFIX", "a b", `DISTRIBUTOR_NATS_SUBJECT_PREFIX "a b": has ' ': use only letters, digits, '_' and '-' (it also names streams and buckets)`},
		{"DISTRIBUTOR_NATS_URL", "http://x", `DISTRIBUTOR_NATS_URL "http://x": server "http://x" has scheme "http": use nats://, tls://, ws:// or wss://`},
		{"DISTRIBUTOR_S3_ENDPOINT", "minio:9000", `DISTRIBUTOR_S3_ENDPOINT "minio:9000": must be an http(s) URL like https://s3.example.com`},
	}
	for _, b := range bad {
		err := c.ApplyEnv(func(k string) (string, bool) { return b.v, k == b.k })
		if err == nil || err.Error() != b.want || !errors.Is(err, ErrInvalid) {
			t.Errorf("%s=%q: err = %v, want %s", b.k, b.v, err, b.want)
		}
	}
}

func TestApplyEnvSecrets(t *testing.T) {
	env := map[string]string{"DISTRIBUTOR_NATS_TOKEN": "tok", "DISTRIBUTOR_NATS_PASSWORD": "pw"}
	lookup := func(k string) (string, bool) { v, ok := env[k]; return v, ok }
	c, err := Parse([]byte("nats: {user: serve}\n"), "")
	if err != nil {
		t.Fatal(err)
	}
	delete(env, "DISTRIBUTOR_NATS_TOKEN")
	if err := c.ApplyEnv(lookup); err != nil || c.NATS.User != "serve" || c.NATS.Password != "pw" {
		t.Fatalf("password from the environment: err %v, NATS %+v", err, c.NATS)
	}

	env["DISTRIBUTOR_NATS_TOKEN"] = "tok"
	err = c.ApplyEnv(lookup)
	if want := "DISTRIBUTOR_NATS_TOKEN and nats.user are both set: use only one of nats.creds, nats.nkey_seed, nats.token or nats.user/password"; err == nil || err.Error() != want || !errors.Is(err, ErrInvalid) {
		t.Errorf("token and user: err = %v, want %s", err, want)
	}

	c, err = Parse(nil, "")
	if err != nil {
		t.Fatal(err)
	}
	if err := c.ApplyEnv(func(k string) (string, bool) { return "tok", k == "DISTRIBUTOR_NATS_TOKEN" }); err != nil || c.NATS.Token != "tok" {
		t.Errorf("token from the environment: err %v, token %q", err, c.NATS.Token)
	}
	err = c.ApplyEnv(func(k string) (string, bool) { return "pw", k == "DISTRIBUTOR_NATS_PASSWORD" })
	if want := "DISTRIBUTOR_NATS_PASSWORD is set without nats.user: set both or neither"; err == nil || err.Error() != want {
		t.Errorf("password without user: err = %v, want %s", err, want)
	}
}

func TestServerTLSPathsAreRelativeToTheFile(t *testing.T) {
	c, err := Parse([]byte("nats: {server_tls: {cert: s.pem, key: /abs/k.pem, client_ca: ca/ca.pem}}\n"), "/etc/distributor/config.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if want := (ServerTLS{Cert: "/etc/distributor/s.pem", Key: "/abs/k.pem", ClientCA: "/etc/distributor/ca/ca.pem"}); c.NATS.ServerTLS != want {
		t.Errorf("ServerTLS = %+v, want %+v", c.NATS.ServerTLS, want)
	}
}

func TestRedactURL(t *testing.T) {
	for _, tt := range []struct{ in, want string }{
		{"nats://127.0.0.1:4222", "nats://127.0.0.1:4222"},
		{"nats://tok@h:4222", "nats://REDACTED@h:4222"},
		{"nats://u:p@ss@h:4222/x@y", "nats://REDACTED@h:4222/x@y"},
		{"tls://u:p@a:4222, nats://b:4222,c:p@d:4222", "tls://REDACTED@a:4222, nats://b:4222,REDACTED@d:4222"},
		{"", ""},
	} {
		if got := RedactURL(tt.in); got != tt.want {
			t.Errorf("RedactURL(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

func TestLoad(t *testing.T) {
	dir := t.TempDir()
	sub := filepath.Join(dir, "etc")
	if err := os.Mkdir(sub, 0o755); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(sub, "config.yaml")
	data := `nats: {creds: nats.creds, store_dir: state/nats, tls: {ca: /abs/ca.pem}}
destinations:
  - {id: rel, backend: local, path: out/latest/}
  - {id: up, backend: local, path: ../www/./site}
  - {id: abs, backend: local, path: /srv/x/../y}
  - id: tpl
    backend: local
    path: out/tpl
    transforms: [{name: markdown_to_html, template: page.tmpl}]
`
	if err := os.WriteFile(path, []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Setenv("DISTRIBUTOR_NATS_URL", "nats://from-env:4222")
	c, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	if c.File != path || c.NATS.URL != "nats://from-env:4222" {
		t.Errorf("File = %q, URL = %q", c.File, c.NATS.URL)
	}
	if c.NATS.CredsFile != filepath.Join(sub, "nats.creds") || c.NATS.StoreDir != filepath.Join(sub, "state/nats") || c.NATS.TLS.CA != "/abs/ca.pem" {
		t.Errorf("NATS paths = %+v", c.NATS)
	}
	for id, want := range map[string]string{
		"rel": filepath.Join(sub, "out/latest"),
		"up":  filepath.Join(dir, "www/site"),
		"abs": "/srv/y",
		"tpl": filepath.Join(sub, "out/tpl"),
	} {
		if d, _ := c.Destination(id); d.Path != want {
			t.Errorf("%s: Path = %q, want %q", id, d.Path, want)
		}
	}
	if d, _ := c.Destination("tpl"); d.Transforms[0].Template != filepath.Join(sub, "page.tmpl") {
		t.Errorf("template = %q", d.Transforms[0].Template)
	}

	// A bad file names itself.
	if err := os.WriteFile(path, []byte(validDest+"    workflow: mirror\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err = Load(path)
	if want := path + `:5: destinations[0] (a): unknown workflow "mirror": use "replacement" or "additive"`; err == nil || err.Error() != want {
		t.Errorf("Load(bad) = %v, want %s", err, want)
	}

	_, err = Load(filepath.Join(dir, "missing.yaml"))
	if err == nil || !errors.Is(err, fs.ErrNotExist) || !errors.Is(err, ErrInvalid) {
		t.Errorf("Load(missing) = %v", err)
	}
}

func TestRelativePathWithoutFile(t *testing.T) {
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	c, err := Parse([]byte("destinations:\n  - {id: a, backend: local, path: out}\n"), "")
	if err != nil {
		t.Fatal(err)
	}
	if got := c.Destinations[0].Path; got != filepath.Join(wd, "out") {
		t.Fatalf("Path = %q, want %q", got, filepath.Join(wd, "out"))
	}
}

func TestRootKey(t *testing.T) {
	c, err := Parse([]byte(`destinations:
  - {id: a, backend: local, path: /srv/reports/}
  - {id: b, backend: local, path: /srv/tmp/../reports}
  - {id: c, backend: local, path: /srv/reports2}
  - {id: s1, backend: s3, bucket: r, path: weather/archive}
  - {id: s2, backend: s3, bucket: r, path: weather/archive/}
  - {id: s3, backend: s3, bucket: other, path: weather/archive/}
  - {id: s4, backend: s3, bucket: root}
`), "/etc/d/config.yaml")
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		"a": "file:///srv/reports/", "b": "file:///srv/reports/", "c": "file:///srv/reports2/",
		"s1": "s3://r/weather/archive/", "s2": "s3://r/weather/archive/", "s3": "s3://other/weather/archive/", "s4": "s3://root/",
	}
	for id, w := range want {
		d, _ := c.Destination(id)
		if got := d.RootKey(); got != w {
			t.Errorf("%s: RootKey = %q, want %q", id, got, w)
		}
	}
	// Built in code, without Parse's normalisation.
	if got := (Destination{Backend: "local", Path: "/srv/a/./b//"}).RootKey(); got != "file:///srv/a/b/" {
		t.Errorf("unnormalised local RootKey = %q", got)
	}
	if got := (Destination{Backend: "local", Path: "/"}).RootKey(); got != "file:///" {
		t.Errorf("filesystem root RootKey = %q", got)
	}
}

func TestPrefix(t *testing.T) {
	tests := []struct {
		tmpl, source, pipeline, want, err string
	}{
		{"{source_name}/", "weatherreporter.tomorrow", "weatherreporter.daily", "tomorrow/", ""},
		{"{source_name}", "weatherreporter.tomorrow", "p", "tomorrow/", ""},
		{"{source_id}/", "weatherreporter.tomorrow", "p", "weatherreporter.tomorrow/", ""},
		{"{source_name}/", "plain", "p", "plain/", ""},
		{"reports/{pipeline_id}/{source_name}/", "a.b.c", "weatherreporter.daily", "reports/weatherreporter.daily/c/", ""},
		{"", "a.b", "p", "", ""},
		{"static", "a.b", "p", "static/", ""},
		{"{source_name}/", "weather.", "p", "", `layout.prefix "{source_name}/" gives "/" for source "weather.": invalid path "": empty`},
		{"x/{source_id}/", "..", "p", "", `layout.prefix "x/{source_id}/" gives "x/../" for source "..": invalid path "x/..": has a ".." segment`},
		{"{nope}/", "a.b", "p", "", `layout.prefix "{nope}/": unknown placeholder {nope}: use {source_id}, {source_name} or {pipeline_id}`},
	}
	for _, tt := range tests {
		d := Destination{ID: "d", Layout: Layout{Prefix: tt.tmpl}}
		got, err := d.Prefix(tt.source, tt.pipeline)
		if tt.err != "" {
			if err == nil || err.Error() != tt.err {
				t.Errorf("Prefix(%q, %q, %q) err = %v, want %s", tt.tmpl, tt.source, tt.pipeline, err, tt.err)
			}
			continue
		}
		if err != nil || got != tt.want {
			t.Errorf("Prefix(%q, %q, %q) = %q, %v; want %q", tt.tmpl, tt.source, tt.pipeline, got, err, tt.want)
		}
	}
}

func TestDuration(t *testing.T) {
	for _, tt := range []struct {
		in   string
		want time.Duration
		str  string
	}{
		{"30d", 30 * 24 * time.Hour, "30d"},
		{"720h", 720 * time.Hour, "30d"},
		{"90m", 90 * time.Minute, "1h30m0s"},
		{"0", 0, "0"},
		{"0s", 0, "0"},
		{"1d", 24 * time.Hour, "1d"},
		{"1h30m", 90 * time.Minute, "1h30m0s"},
		{"1d12h", 36 * time.Hour, "1d12h"},
		{"36h", 36 * time.Hour, "1d12h"},
		{"7d30m", 7*24*time.Hour + 30*time.Minute, "7d30m"},
		{"1d1h0m1s", 25*time.Hour + time.Second, "1d1h0m1s"},
		{"1d90s", 24*time.Hour + 90*time.Second, "1d1m30s"},
		{"1d500ms", 24*time.Hour + 500*time.Millisecond, "1d500ms"},
	} {
		d, err := ParseDuration(tt.in)
		if err != nil || time.Duration(d) != tt.want || d.String() != tt.str {
			t.Errorf("ParseDuration(%q) = %v (%s), %v; want %v (%s)", tt.in, time.Duration(d), d, err, tt.want, tt.str)
		}
		var back Duration
		if err := back.UnmarshalText([]byte(d.String())); err != nil || back != d {
			t.Errorf("round trip of %s = %v, %v", d, back, err)
		}
	}
	for _, bad := range []string{"", "d", "1.5d", "-1d", "30days", "3600", "99999999999999999d", "1d-2h", "1d1d", "1dx", "106751d24h"} {
		if _, err := ParseDuration(bad); err == nil {
			t.Errorf("ParseDuration(%q) succeeded", bad)
		}
	}
}

// Roots are compared as folders on disk: a symlink cannot hide a system
// folder, a nesting, or two spellings of one root (which would take two
// leases). The same path in two destinations stays a shared root.
func TestRootsThroughSymlinks(t *testing.T) {
	tmp, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	real := filepath.Join(tmp, "real")
	link := filepath.Join(tmp, "link") // -> real
	if err := os.MkdirAll(filepath.Join(real, "site"), 0o755); err != nil {
		t.Fatal(err)
	}
	for name, target := range map[string]string{link: real, filepath.Join(tmp, "etc"): "/etc", filepath.Join(tmp, "slash"): "/"} {
		if err := os.Symlink(target, name); err != nil {
			t.Fatal(err)
		}
	}
	const (
		nestedFix = "destination roots must be the same or not nested"
		sameFix   = "write the same path in both to share the root, or give each its own folder"
		ownFolder = `give the destination a folder of its own, e.g. "/srv/reports"`
	)
	for _, tc := range []struct {
		name, a, b string
		want       string // %[1]s = tmp; "" = valid
	}{
		{"link to /etc", "%[1]s/etc", "", `config.yaml:4: destinations[0] (a): path "%[1]s/etc" resolves through symlinks to the system folder "/etc": ` + ownFolder},
		{"link to /", "%[1]s/slash/", "", `config.yaml:4: destinations[0] (a): path "%[1]s/slash" resolves through symlinks to the system folder "/": ` + ownFolder},
		{"inner through a symlink", "%[1]s/real", "%[1]s/link/site",
			`config.yaml:7: destinations[1] (b): root file://%[1]s/link/site/ is nested with the root of destinations[0] (a) (file://%[1]s/real/) through symlinks (file://%[1]s/real/site/ and file://%[1]s/real/): ` + nestedFix},
		{"outer through a symlink", "%[1]s/real/site", "%[1]s/link",
			`config.yaml:7: destinations[1] (b): root file://%[1]s/link/ is nested with the root of destinations[0] (a) (file://%[1]s/real/site/) through symlinks (file://%[1]s/real/ and file://%[1]s/real/site/): ` + nestedFix},
		{"inner not created yet", "%[1]s/real", "%[1]s/link/new/deeper",
			`config.yaml:7: destinations[1] (b): root file://%[1]s/link/new/deeper/ is nested with the root of destinations[0] (a) (file://%[1]s/real/) through symlinks (file://%[1]s/real/new/deeper/ and file://%[1]s/real/): ` + nestedFix},
		{"one folder, two spellings", "%[1]s/real/site", "%[1]s/link/site",
			`config.yaml:7: destinations[1] (b): root file://%[1]s/link/site/ is the same folder as the root of destinations[0] (a) (file://%[1]s/real/site/) through symlinks (both are file://%[1]s/real/site/): ` + sameFix},
		{"shared root through a symlink", "%[1]s/link/site", "%[1]s/link/site", ""},
		{"shared root", "%[1]s/real/site", "%[1]s/real/site/", ""},
		{"siblings through a symlink", "%[1]s/link/site", "%[1]s/real/other", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			yaml := fmt.Sprintf("destinations:\n  - id: a\n    backend: local\n    path: "+tc.a+"\n", tmp)
			if tc.b != "" {
				yaml += fmt.Sprintf("  - id: b\n    backend: local\n    path: "+tc.b+"\n", tmp)
			}
			_, err := Parse([]byte(yaml), "config.yaml")
			switch want := fmt.Sprintf(tc.want, tmp); {
			case tc.want == "" && err != nil:
				t.Fatalf("Parse:\n%s\n%v", yaml, err)
			case tc.want == "":
			case err == nil || err.Error() != want || !errors.Is(err, ErrInvalid):
				t.Fatalf("Parse:\n%s\n got %v\nwant %s", yaml, err, want)
			}
		})
	}
}
