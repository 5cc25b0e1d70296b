package main

// serve's status page: / (HTML) and /status.json (status --json) on
// http.listen.

import (
	"bytes"
	"context"
	"encoding/json"
	"html/template"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/rs/zerolog"

	"github.com/distributor/distributor/catalog"
	"github.com/distributor/distributor/config"
	"github.com/distributor/distributor/events"
	"github.com/distributor/distributor/service"
	"github.com/distributor/distributor/stores"
)

const (
	// statusPageTimeout bounds the reads of one status: the roots, the
	// lease bucket, the events stream and the consumer.
	statusPageTimeout = 5 * time.Second

	// statusPageTTL is how long one status is served again, so that a
	// storm of refreshes reads the catalogs once.
	statusPageTTL = 2 * time.Second

	// statusPageRefresh is how often, in seconds, the page reloads itself.
	statusPageRefresh = 10
)

// statusPageData is one status of serve: the report of `status --json`
// (without leftovers), the durable consumer's backlog and when it was read.
type statusPageData struct {
	Status   statusJSON
	Consumer consumerBacklog
	Time     time.Time
	Version  string

	// Refresh is how often the page reloads itself, in seconds.
	Refresh int
}

// consumerBacklog is the durable consumer's pending and ack pending, as
// /metrics reports them.
type consumerBacklog struct {
	Known               bool
	Pending, AckPending uint64

	// Error is why the backlog could not be read.
	Error string
}

// statusPage serves the status page and /status.json from one status
// read at most every statusPageTTL, within statusPageTimeout.
type statusPage struct {
	read func(context.Context) statusPageData
	html *template.Template
	log  zerolog.Logger

	// mu is held while a status is read: concurrent requests wait for that
	// read rather than starting their own.
	mu    sync.Mutex
	last  statusPageData
	until time.Time
}

// newStatusPage reads the status of every destination of cfg through
// serve's own NATS connection (ready), never walking roots for leftovers.
func (a *app) newStatusPage(cfg *config.Config, ready *readiness) *statusPage {
	st := stores.New(cfg)
	catalogs := &service.CatalogSummaries{}
	read := func(ctx context.Context) statusPageData {
		streams, n := ready.statusNATS()
		d := statusPageData{Version: version, Refresh: statusPageRefresh, Consumer: consumerBacklog{Error: "NATS is not known"}}

		// The consumer first: one request, bounded as a /metrics scrape's.
		if streams != nil {
			cctx, cancel := context.WithTimeout(ctx, readyCheckTimeout)
			pending, ack, err := ready.consumerInfo(cctx)
			cancel()
			if err != nil {
				d.Consumer.Error = oneLine(err.Error())
			} else {
				d.Consumer = consumerBacklog{Known: true, Pending: pending, AckPending: ack}
			}
		}

		// A root that cannot be read is in the report; nothing else fails.
		d.Status, _ = a.readStatus(ctx, cfg, cfg.Destinations, statusSources{stores: st, streams: streams, nats: n, unrouted: true, catalogs: catalogs})
		d.Time = time.Now().UTC().Truncate(time.Second)
		return d
	}
	funcs := template.FuncMap{
		"root":     a.showRoot,
		"time":     catalog.FormatTime,
		"short":    service.ShortDigest,
		"join":     func(s []string) string { return strings.Join(s, ", ") },
		"catalog":  catalogText,
		"others":   otherOwnersText,
		"recovery": recoveryText,
		"retired":  func(r *retiredJSON) string { return retiredText(*r) },
		"kvLease":  kvLeaseText,
		"holder":   holderText,
		"last":     lastText,
		"ago":      ago,
		"health":   healthParts,
	}

	// html/template escapes what comes from catalogs and events (source
	// ids, bundle locations, messages) by context.
	html := template.Must(template.New("status").Funcs(funcs).Parse(statusPageHTML))
	return &statusPage{read: read, html: html, log: a.log}
}

// statusNATS is what the status page reads of NATS: serve's streams while
// its connection is up, else nothing (a read would wait for a reconnection).
func (r *readiness) statusNATS() (*events.Streams, natsStatusJSON) {
	r.mu.Lock()
	nc, s := r.nc, r.streams
	r.mu.Unlock()
	switch {
	case nc == nil || s == nil:
		return nil, natsStatusJSON{Error: "connecting to NATS"}
	case !nc.IsConnected():
		return nil, natsStatusJSON{Error: "NATS connection is " + nc.Status().String()}
	}
	return s, natsStatusJSON{Known: true}
}

// get returns the last status while it is fresh, else reads a new one. The
// read does not end with the request: the waiting requests share it.
func (p *statusPage) get(ctx context.Context) statusPageData {
	p.mu.Lock()
	defer p.mu.Unlock()
	if time.Now().Before(p.until) {
		return p.last
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), statusPageTimeout)
	defer cancel()
	p.last = p.read(ctx)
	p.until = time.Now().Add(statusPageTTL)
	return p.last
}

func (p *statusPage) serveJSON(w http.ResponseWriter, req *http.Request) {
	d := p.get(req.Context())
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetIndent("", "  ")
	if err := enc.Encode(d.Status); err != nil {
		p.fail(w, err)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	_, _ = w.Write(b.Bytes())
}

func (p *statusPage) serveHTML(w http.ResponseWriter, req *http.Request) {
	d := p.get(req.Context())
	var b bytes.Buffer
	if err := p.html.Execute(&b, d); err != nil {
		p.fail(w, err)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	_, _ = w.Write(b.Bytes())
}

func (p *statusPage) fail(w http.ResponseWriter, err error) {
	p.log.Error().Err(err).Msg("status page")
	http.Error(w, "status page: "+err.Error(), http.StatusInternalServerError)
}

// statusPageHTML is the status page: inline CSS, no script; it reloads
// itself every statusPageRefresh. Three destinations fit a 1280×900 screen.
const statusPageHTML = `<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta http-equiv="refresh" content="{{.Refresh}}">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>distributor status</title>
<style>
body{font:13px/1.4 system-ui,sans-serif;margin:.6em auto;max-width:96em;padding:0 1em;color:#1d1d1d;background:#fff}
header{display:flex;flex-wrap:wrap;gap:.3em 1.2em;align-items:baseline;margin-bottom:.3em}
h1{font-size:1.2em;margin:0}
h2{font-size:1.1em;margin:0}
section{border-top:1px solid #ddd;padding:.4em 0 .3em}
.head{display:flex;flex-wrap:wrap;gap:.2em .5em;align-items:baseline}
.pill{padding:0 .5em;border-radius:.7em;background:#eee;white-space:nowrap}
.pill.ok{background:#e1f3e5;color:#17612a}
.pill.err{background:#fde4e8;color:#b00020;font-weight:600}
.pill.warn{background:#fff0cc;color:#6d4500;font-weight:600}
.pill.muted{color:#666}
p{margin:.1em 0}
table{border-collapse:collapse;margin:.2em 0}
th,td{text-align:left;padding:0 1em 0 0;vertical-align:top}
th{font-weight:600;color:#555;border-bottom:1px solid #eee}
td.n{text-align:right}
code{font:12px ui-monospace,Menlo,Consolas,monospace}
dl{display:grid;grid-template-columns:max-content minmax(0,1fr) max-content minmax(0,1fr);gap:0 1em;margin:.2em 0}
dt{color:#555}
dd{margin:0;overflow-wrap:anywhere}
dd.wide{grid-column:2/5}
.muted{color:#777}
.err{color:#b00020}
.stale{color:#8a8a8a}
[title]{text-decoration:underline dotted #aaa}
</style>
</head>
<body>
<header>
<h1>distributor status</h1>
<span class="muted">distributor {{.Version}}, read {{time .Time}}, reloads every {{.Refresh}} s · <a href="status.json">status.json</a></span>
<span>NATS: {{if .Status.NATS.Known}}known{{else}}unknown{{end}}{{with .Status.NATS.Error}}: <span class="err">{{.}}</span>{{end}}</span>
<span>consumer: {{if .Consumer.Known}}{{.Consumer.Pending}} pending, {{.Consumer.AckPending}} ack pending{{else}}unknown: {{.Consumer.Error}}{{end}}</span>
{{- with .Status.FailuresWithoutDestination}}{{if .Count}}
<a class="pill err" href="#without-destination">{{.Count}} failure(s) without a destination</a>
{{- end}}{{end}}
</header>
{{- $known := .Status.NATS.Known}}
{{- $now := .Time}}
{{- range .Status.Destinations}}
<section id="dest-{{.DestinationID}}">
<div class="head"><h2>{{.DestinationID}}</h2>
{{- range health . $known $now}} <span class="pill{{with .Class}} {{.}}{{end}}"{{with .Title}} title="{{.}}"{{end}}>{{.Text}}</span>{{end}}</div>
<p class="muted"><code>{{root .Root}}</code> · {{.Backend}} · {{.Workflow}}{{with .Pipelines}} · pipelines: {{join .}}{{end}}</p>
{{- with .Error}}
<p class="err">error: {{.}}</p>
{{- end}}
{{- with .Summary.Pinned}}
<p class="err">pinned: {{.}}</p>
{{- end}}
{{- if .Owners}}
<table>
<tr><th>pipeline</th><th>source</th><th>created</th><th>digest</th><th class="n">outputs</th><th class="n">bytes</th><th>updated</th></tr>
{{- range $o := .Owners}}{{range $i, $s := .Sources}}
<tr><td>{{if eq $i 0}}{{$o.PipelineID}}{{end}}</td><td>{{$s.ID}}</td><td title="{{time $s.Created}}">{{ago $s.Created $now}}</td><td><code title="{{$s.Digest}}">{{short $s.Digest}}</code></td><td class="n">{{$s.Outputs}}</td><td class="n">{{$s.Bytes}}</td><td title="{{time $s.UpdatedAt}}">{{ago $s.UpdatedAt $now}}</td></tr>
{{- end}}{{end}}
</table>
{{- end}}
<dl>
<dt>catalog</dt><dd>{{with catalog .}}{{.}}{{else}}-{{end}}</dd>
<dt>pending recovery</dt><dd>{{recovery .PendingRecovery}}</dd>
{{- with .Retired}}
<dt>retired</dt><dd>{{retired .}}</dd>
{{- end}}
{{- with others .OtherOwners}}
<dt>also in this root</dt><dd class="wide">{{.}}</dd>
{{- end}}
<dt>lease (NATS)</dt><dd>{{with kvLease .Lease $known}}{{.}}{{else}}unknown without NATS{{end}}</dd>
<dt>lock object</dt><dd>{{holder .Lease.Lock}}</dd>
{{- if $known}}
<dt>last published</dt><dd class="wide">{{with .LastPublished}}<span title="{{time .Time}}">{{ago .Time $now}}</span>: {{end}}{{last .LastPublished}}</dd>
<dt>last failure</dt><dd class="wide{{if .Summary.LastFailureStale}} stale{{else if .LastFailure}} err{{end}}">{{with .LastFailure}}<span title="{{time .Time}}">{{ago .Time $now}}</span>: {{end}}{{last .LastFailure}}{{if .Summary.LastFailureStale}} (older than the last publication){{end}}</dd>
{{- with .NotifyFailures}}
<dt>notify failures</dt><dd class="wide">{{.Count}} in the events stream{{with .Last}}; newest <span title="{{time .Time}}">{{ago .Time $now}}</span>: {{.TargetType}} target {{.Target}} gave up on {{.ResultType}} result <code>{{.ResultID}}</code> after {{.Attempts}} attempt(s): <span class="err">{{.Message}}</span>; send it again: <code>{{.Replay}}</code>{{end}}</dd>
{{- end}}
{{- else}}
<dt>last published, last failure</dt><dd class="wide muted">unknown without NATS</dd>
{{- end}}
</dl>
</section>
{{- end}}
{{- with .Status.FailuresWithoutDestination}}
<section id="without-destination">
<h2>Failures without a destination</h2>
{{- if .Count}}
<p class="muted">{{.Count}} in the events stream (invalid events, unknown pipelines or destinations); the newest:</p>
<table>
<tr><th>when</th><th>pipeline</th><th>reason</th><th>message</th><th>event</th></tr>
{{- range .Recent}}
<tr><td title="{{time .Time}}">{{ago .Time $now}}</td><td>{{or .PipelineID "-"}}</td><td class="err">{{.Reason}}</td><td>{{.Message}}</td><td><code>{{.EventID}}</code></td></tr>
{{- end}}
</table>
{{- else}}
<p class="muted">none in the events stream</p>
{{- end}}
</section>
{{- end}}
</body>
</html>
`
