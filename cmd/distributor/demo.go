package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"
	"github.com/spf13/cobra"

	"github.com/distributor/distributor/bundle"
	"github.com/distributor/distributor/catalog"
	"github.com/distributor/distributor/config"
	"github.com/distributor/distributor/consumer"
	"github.com/distributor/distributor/events"
	"github.com/distributor/distributor/natsserver"
	"github.com/distributor/distributor/stores"
)

const demoConfig = `# distributor demo configuration (paths filled in at run time)
pipelines:
  - id: weatherreporter.daily
    destinations: [latest-html, weather-archive]
destinations:
  - id: latest-html
    backend: local
    path: %[1]s/latest
    workflow: additive
    layout: {prefix: "{source_name}/"}
    transforms:
      - {name: markdown_to_html, match: "**/*.md", index: report.md}
    links: {base_url: "https://reports.example.com/weather/", pretty: true}
  - id: weather-archive
    backend: local
    path: %[1]s/archive
    workflow: replacement
    publish: {sources: true, html: false}
`

func (a *app) demoCommand() *cobra.Command {
	var keep string
	cmd := &cobra.Command{
		Use:   "demo",
		Short: "Run the whole flow on an embedded NATS server and temp folders, and show what happened",
		Args:  noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			dir := keep
			if dir == "" {
				tmp, err := os.MkdirTemp("", "distributor-demo-")
				if err != nil {
					return err
				}
				defer os.RemoveAll(tmp)
				dir = tmp
			} else if err := os.MkdirAll(dir, 0o755); err != nil {
				return err
			}
			return a.demo(cmd.Context(), dir)
		},
	}
	cmd.Flags().StringVar(&keep, "keep", "", "work in this folder and keep it afterwards (default: a temp folder, removed)")
	return cmd
}

func (a *app) demo(ctx context.Context, dir string) error {
	cfg, err := a.demoConfiguration(dir)
	if err != nil {
		return err
	}
	env, err := a.startDemo(ctx, dir, cfg)
	if err != nil {
		return err
	}
	defer env.close()
	a.demoStep("embedded NATS JetStream server started; a consumer is waiting for bundle-ready events")

	a.demoStep("bundle 1: a report and a forecast, announced with a bundle-ready event")
	if err := a.demoPublish(ctx, env, "run-1", map[string]string{
		"report.md":         "# Weather for tomorrow\n\nSunny, 24 °C. See the [forecast table](data/forecast.md).\n",
		"data/forecast.md":  "# Forecast\n\n| hour | °C |\n|-----:|---:|\n| 09 | 18 |\n| 15 | 24 |\n",
		"data/forecast.csv": "hour,celsius\n09,18\n15,24\n",
	}); err != nil {
		return err
	}
	a.demoCatalog(ctx, cfg, "latest-html")

	a.demoStep("bundle 2: the report changes, forecast.csv is gone, alerts.csv is new")
	if err := a.demoPublish(ctx, env, "run-2", map[string]string{
		"report.md":        "# Weather for tomorrow\n\nThunderstorms after 16:00. See the [forecast table](data/forecast.md).\n",
		"data/forecast.md": "# Forecast\n\n| hour | °C |\n|-----:|---:|\n| 09 | 18 |\n| 15 | 24 |\n",
		"data/alerts.csv":  "from,to,kind\n16:00,20:00,thunderstorm\n",
	}); err != nil {
		return err
	}
	fmt.Fprintln(a.stdout, "additive latest-html kept data/forecast.csv; replacement weather-archive deleted it:")
	a.demoCatalog(ctx, cfg, "latest-html")
	a.demoCatalog(ctx, cfg, "weather-archive")

	a.demoStep("someone copies a file by hand into latest-html at a path bundle 3 wants")
	unmanaged, err := a.demoCollision(ctx, env)
	if err != nil {
		return err
	}

	a.demoStep("the operator removes the stray file and replays the collision")
	if err := os.Remove(unmanaged); err != nil {
		return err
	}
	replayed, err := a.demoReplayCollisions(ctx, env)
	if err != nil {
		return err
	}
	a.demoCatalog(ctx, cfg, "latest-html")

	a.demoStep("what is on disk")
	a.demoListFiles(dir)
	fmt.Fprintf(a.stdout, "\ndone: %d bundles published, 1 collision, %d replay. Try it with your own files:\n", 3, replayed)
	fmt.Fprintln(a.stdout, "  distributor bundle create DIR --id my.source && distributor apply --config distributor.yaml --pipeline P --bundle DIR")
	return nil
}

// demoStep prints the heading of one step of the demo's story.
func (a *app) demoStep(format string, args ...any) {
	fmt.Fprintf(a.stdout, "\n==> "+format+"\n", args...)
}

// demoConfiguration makes the demo's folders in dir and prints and returns
// its configuration.
func (a *app) demoConfiguration(dir string) (*config.Config, error) {
	for _, d := range []string{"latest", "archive", "bundles"} {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o755); err != nil {
			return nil, err
		}
	}
	cfgText := fmt.Sprintf(demoConfig, dir)
	cfg, err := config.Parse([]byte(cfgText), "demo.yaml")
	if err != nil {
		return nil, fmt.Errorf("demo configuration: %w", err)
	}
	a.demoStep("configuration: one pipeline, an additive and a replacement destination")
	fmt.Fprint(a.stdout, indent(cfgText))
	return cfg, nil
}

// demoEnv is the demo's running system: an embedded NATS server with the
// streams, and a consumer publishing what is announced there.
type demoEnv struct {
	dir     string
	js      jetstream.JetStream
	streams *events.Streams
	created time.Time // of the last bundle
	close   func()    // stops the consumer, then the server
}

// startDemo starts the embedded server in dir and a consumer on it.
func (a *app) startDemo(ctx context.Context, dir string, cfg *config.Config) (*demoEnv, error) {
	srv, err := natsserver.Start(ctx, natsserver.Options{StoreDir: filepath.Join(dir, "nats")})
	if err != nil {
		return nil, err
	}
	nc, err := srv.Connect()
	if err != nil {
		srv.Shutdown()
		return nil, err
	}
	js, streams, err := setupStreams(ctx, nc, cfg, zerolog.Nop())
	if err != nil {
		nc.Close()
		srv.Shutdown()
		return nil, err
	}

	// The demo's own output tells the story; the consumer's info lines
	// would only interleave with it (--log-level debug shows them).
	log := a.log
	if a.log.GetLevel() == zerolog.InfoLevel {
		log = a.log.Level(zerolog.WarnLevel)
	}
	svc := a.newService(cfg, log, serveLocker(js, streams, "demo", log), 15*time.Second)
	opts := consumerOptions(cfg, 2, log)
	opts.BackOff = []time.Duration{200 * time.Millisecond} // the demo's pace
	cons := consumer.New(js, streams.Subjects, svc, opts)
	consCtx, stopConsumer := context.WithCancel(ctx)
	consDone := make(chan error, 1)
	go func() { consDone <- cons.Run(consCtx) }()
	return &demoEnv{dir: dir, js: js, streams: streams, close: func() {
		stopConsumer()
		<-consDone //nolint:errcheck // the consumer's error after the stop is the cancellation
		nc.Close()
		srv.Shutdown()
	}}, nil
}

// demoPublish writes files as bundle name, announces it and prints the
// result events.
func (a *app) demoPublish(ctx context.Context, env *demoEnv, name string, files map[string]string) error {
	// Each bundle is a newer version than the last, even within a
	// second: an older one would be superseded.
	if now := time.Now().UTC().Truncate(time.Second); now.After(env.created) {
		env.created = now
	} else {
		env.created = env.created.Add(time.Second)
	}
	bdir := filepath.Join(env.dir, "bundles", name)
	if err := os.MkdirAll(bdir, 0o755); err != nil {
		return err
	}
	for p, content := range files {
		fp := filepath.Join(bdir, filepath.FromSlash(p))
		if err := os.MkdirAll(filepath.Dir(fp), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(fp, []byte(content), 0o644); err != nil {
			return err
		}
	}
	m, data, err := bundle.Create(ctx, bdir, "weatherreporter.tomorrow", env.created)
	if err != nil {
		return err
	}
	fmt.Fprintf(a.stdout, "bundle %s: %d files, manifest digest %s\n", bdir, len(m.Files), bundle.Digest(data))
	ev := events.BundleReady{PipelineID: "weatherreporter.daily", Bundle: bdir, ManifestDigest: bundle.Digest(data)}
	return a.announce(ctx, env.js, env.streams, ev, resultWait{results: 2, timeout: 30 * time.Second})
}

// demoCollision puts an unmanaged file where bundle 3 wants to write and
// publishes bundle 3, which must collide there; it returns the file.
func (a *app) demoCollision(ctx context.Context, env *demoEnv) (string, error) {
	unmanaged := filepath.Join(env.dir, "latest", "tomorrow", "data", "radar.png")
	if err := os.WriteFile(unmanaged, []byte("not distributor's"), 0o644); err != nil {
		return "", err
	}
	fmt.Fprintf(a.stdout, "wrote %s (unmanaged: not in the catalog)\n", unmanaged)
	files3 := map[string]string{
		"report.md":        "# Weather for tomorrow\n\nClearing up by evening.\n",
		"data/forecast.md": "# Forecast\n\nNo change.\n",
		"data/radar.png":   "PNG…",
	}
	if err := a.demoPublish(ctx, env, "run-3", files3); err == nil {
		return "", fmt.Errorf("demo: expected a collision on %s", unmanaged)
	}
	fmt.Fprintln(a.stdout, "the collision blocked latest-html entirely (nothing written there); the archive was published")
	return unmanaged, nil
}

// demoReplayCollisions replays every collision event as `replay` would,
// and returns how many it replayed.
func (a *app) demoReplayCollisions(ctx context.Context, env *demoEnv) (int, error) {
	replayed := 0
	err := readEvents(ctx, env.streams, eventFilter{types: []string{events.TypeCollision}}, false, func(r events.Result, _ jetstream.MsgMetadata) error {
		if r.Original == nil {
			return nil
		}
		ev := *r.Original
		ev.ReplayOf, ev.ID, ev.ProducedAt = ev.ID, ev.ID+replaySep+"1", time.Time{}
		ev.Destinations = []string{r.DestinationID}
		replayed++
		return a.announce(ctx, env.js, env.streams, ev, resultWait{results: 1, timeout: 30 * time.Second})
	})
	return replayed, err
}

// demoListFiles prints the files in the demo's roots, without distributor's
// own folder.
func (a *app) demoListFiles(dir string) {
	for _, d := range []string{"latest", "archive"} {
		_ = filepath.WalkDir(filepath.Join(dir, d), func(p string, e os.DirEntry, err error) error {
			if err == nil && !e.IsDir() && !strings.Contains(p, "/.distributor/") {
				rel, _ := filepath.Rel(dir, p)
				fmt.Fprintf(a.stdout, "  %s\n", rel)
			}
			return nil
		})
	}
}

func (a *app) demoCatalog(ctx context.Context, cfg *config.Config, dest string) {
	d, _ := cfg.Destination(dest)
	root, err := stores.New(cfg).Destination(ctx, d)
	if err != nil {
		return
	}
	data, _, err := root.ReadVersion(ctx, catalog.FileName)
	if err != nil || data == nil {
		return
	}
	cat, _, err := catalog.Parse(data)
	if err != nil || cat == nil {
		return
	}
	fmt.Fprintf(a.stdout, "catalog of %s (%s/%s):\n", dest, d.Path, catalog.FileName)
	tw := tabwriter.NewWriter(a.stdout, 0, 2, 2, ' ', 0)
	for _, o := range cat.Outputs {
		extra := ""
		if o.Kind == catalog.KindGenerated {
			extra = "from " + o.SourcePath
		}
		if o.URL != "" {
			extra = strings.TrimSpace(extra + " " + o.URL)
		}
		fmt.Fprintf(tw, "  %s\t%s\t%d B\t%s\t%s\n", o.Path, o.Kind, o.Size, catalog.FormatTime(o.UpdatedAt), extra)
	}
	_ = tw.Flush()
}

func indent(s string) string {
	return "    " + strings.ReplaceAll(strings.TrimRight(s, "\n"), "\n", "\n    ") + "\n"
}
