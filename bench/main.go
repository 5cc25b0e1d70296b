// Command bench times distributor's direct-mode apply against the peer tools
// it finds (cp, rsync, rclone) on the same generated data, interleaved run
// by run, and prints one markdown table of medians.
//
//	go run ./bench                       # every local case but the million
//	go run ./bench -cases first-small,nochange -runs 7
//	go run ./bench -huge                 # adds the 1,000,000-output catalog
//
// Every timed run writes into a target prepared before the run (a fresh
// empty folder, or the state the case starts from); old targets are deleted
// only after all timed runs, because on ext4 the file creations right after
// a large rm -rf cost several times more. Before each timed run the source
// is read once (rclone drops what it reads from the page cache).
//
// The S3 cases have distributor and rclone publish into one local S3
// server that every tool shares (gofakes3, memory backend, in a process of
// its own on a loopback port: bench/s3server). Every timed run gets a
// bucket created before the timed runs; first publishes drop theirs right
// after the run (the server holds objects in memory). Before each timed
// run the server collects its garbage and returns the memory freed, so
// that no run pays for what an earlier one left there.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"time"

	"github.com/distributor/distributor/catalog"
)

func main() {
	if os.Getenv(spawnEnv) != "" {
		spawnMain()
		return
	}
	var o options
	flag.StringVar(&o.cases, "cases", "", "comma-separated cases to run (default: all but huge); see -list")
	flag.IntVar(&o.runs, "runs", 5, "timed runs per tool and case (the median is reported)")
	flag.BoolVar(&o.huge, "huge", false, "also run the 1,000,000-output catalog cases (about 10 minutes to prepare)")
	flag.StringVar(&o.dir, "dir", "", "work folder (default: a new temp folder, removed at the end)")
	flag.BoolVar(&o.keep, "keep", false, "keep the work folder")
	flag.StringVar(&o.baseline, "baseline", "", "also time distributor built from this git revision (e.g. main), as a peer")
	flag.BoolVar(&o.reuse, "reuse", false, "with -dir: reuse the big-catalog roots an earlier -keep run prepared there (reset, not rewritten)")
	list := flag.Bool("list", false, "list the cases and exit")
	flag.Parse()
	if *list {
		for _, c := range allCases() {
			fmt.Printf("%-20s %s\n", c.name, c.title)
		}
		return
	}
	if err := supported(); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
	if err := run(context.Background(), o); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

type options struct {
	cases string
	runs  int
	huge  bool
	dir   string
	keep  bool

	// baseline is a git revision whose distributor runs as one more peer.
	baseline string

	// reuse resets the big-catalog roots found in dir instead of writing
	// their million files again.
	reuse bool
}

// tool is one contender of a case: distributor or a peer.
type tool struct {
	name string

	// prepare makes the target of timed run i (untimed, before any run).
	prepare func(i int) error

	// before runs untimed right before run i (settling what earlier runs
	// left behind).
	before func(i int) error

	// cmd is the timed command of run i.
	cmd func(i int) []string

	// measure, when set, times run i itself instead of a command (a
	// request to a running service), returning seconds and peak RSS (KiB).
	measure func(ctx context.Context, i int) (float64, int64, error)

	// done, when set, runs once after the case's runs (stopping what
	// prepare started), whether they succeeded or not.
	done func() error

	// after runs untimed right after run i (restoring a starting state).
	after func(i int) error
}

type result struct {
	secs []float64
	rss  []int64 // KiB
}

type caseDef struct {
	name, title string
	huge        bool
	setup       func(e *env) ([]tool, error)
}

// dist is one distributor build; tag names its targets and configurations.
type dist struct{ name, bin, tag string }

// env is what the cases share: the work folder and the tools found.
type env struct {
	work string

	// dists are the distributor builds timed: this tree's first, then the
	// -baseline one.
	dists []dist
	runs  int
	peers map[string]string // name → path, for the peers installed
	reuse bool
}

func run(ctx context.Context, o options) error {
	if o.runs < 1 {
		return errors.New("-runs must be at least 1")
	}
	cases, err := selectCases(o)
	if err != nil {
		return err
	}
	work, remove, err := workDir(o)
	if err != nil {
		return err
	}
	defer remove()
	e, err := newEnv(ctx, o, work)
	if err != nil {
		return err
	}
	var rows []row
	for _, c := range cases {
		r, err := e.runCase(ctx, c)
		if err != nil {
			return err
		}
		if len(r.tools) > 0 {
			rows = append(rows, r)
		}
	}
	printTable(rows, o.runs)
	return nil
}

// workDir is -dir, made if missing, or a temp folder; remove deletes the
// temp folder unless -keep.
func workDir(o options) (work string, remove func(), err error) {
	if o.dir != "" {
		return o.dir, func() {}, os.MkdirAll(o.dir, 0o755)
	}
	if work, err = os.MkdirTemp("", "distributor-bench-"); err != nil {
		return "", nil, err
	}
	if o.keep {
		return work, func() {}, nil
	}
	return work, func() { os.RemoveAll(work) }, nil
}

// newEnv builds the distributors to time (this tree's and -baseline's) in
// work and finds the peers installed.
func newEnv(ctx context.Context, o options, work string) (*env, error) {
	e := &env{work: work, runs: o.runs, reuse: o.reuse, peers: map[string]string{}}
	e.dists = []dist{{name: "distributor", bin: filepath.Join(work, "distributor"), tag: "distributor"}}
	fmt.Fprintln(os.Stderr, "bench: building distributor")
	if out, err := exec.CommandContext(ctx, "go", "build", "-o", e.dists[0].bin, "./cmd/distributor").CombinedOutput(); err != nil {
		return nil, fmt.Errorf("go build (run from the repository root): %v\n%s", err, out)
	}
	if o.baseline != "" {
		if err := e.buildBaseline(ctx, o.baseline); err != nil {
			return nil, err
		}
	}
	for _, p := range []string{"cp", "rsync", "rclone", "sync"} {
		if path, err := exec.LookPath(p); err == nil {
			e.peers[p] = path
		} else {
			fmt.Fprintf(os.Stderr, "bench: %s not found, skipped (apt-get install -y rsync rclone)\n", p)
		}
	}
	return e, nil
}

// selectCases is the cases -cases names (every case but the huge ones
// without -huge, when it names none), in their usual order.
func selectCases(o options) ([]caseDef, error) {
	selected := map[string]bool{}
	for _, c := range strings.Split(o.cases, ",") {
		if c = strings.TrimSpace(c); c != "" {
			selected[c] = true
		}
	}
	known := map[string]bool{}
	for _, c := range allCases() {
		known[c.name] = true
	}
	for c := range selected {
		if !known[c] {
			return nil, fmt.Errorf("unknown case %q (see -list)", c)
		}
	}
	var out []caseDef
	for _, c := range allCases() {
		if len(selected) > 0 && !selected[c.name] || len(selected) == 0 && c.huge && !o.huge {
			continue
		}
		out = append(out, c)
	}
	return out, nil
}

// row is one case's timings, one result per tool.
type row struct {
	c     caseDef
	tools []tool
	res   map[string]*result
}

// runCase prepares case c and times its tools, A B A B: every tool once
// per round, each round starting one tool later (A B C, B C A, C A B).
func (e *env) runCase(ctx context.Context, c caseDef) (row, error) {
	fmt.Fprintf(os.Stderr, "bench: %s: preparing\n", c.name)
	tools, err := c.setup(e)
	if err != nil {
		return row{}, fmt.Errorf("%s: %w", c.name, err)
	}
	if len(tools) == 0 {
		return row{}, nil // skipped; setup said why
	}
	defer func() {
		for _, t := range tools {
			if t.done != nil {
				if err := t.done(); err != nil {
					fmt.Fprintf(os.Stderr, "bench: %s: %s: %v\n", c.name, t.name, err)
				}
			}
		}
	}()
	for _, t := range tools {
		for i := range e.runs {
			if t.prepare != nil {
				if err := t.prepare(i); err != nil {
					return row{}, fmt.Errorf("%s: prepare %s: %w", c.name, t.name, err)
				}
			}
		}
	}
	syncAll()
	res := map[string]*result{}
	for i := range e.runs {
		// Each round starts one tool later: a run right after another
		// tool's pays for what that one left behind (on the S3 server,
		// right after rclone's sync), and in a fixed order the same tool
		// always paid.
		for j := range tools {
			t := tools[(i+j)%len(tools)]
			warm(filepath.Join(e.work, c.name, "src"))

			// Nothing another tool wrote is left to flush: distributor's
			// syncfs (and a "; sync") would otherwise pay for the previous
			// tools' writes, and whoever runs first in a round would lose.
			syncAll()
			if t.before != nil {
				if err := t.before(i); err != nil {
					return row{}, fmt.Errorf("%s: before %s run %d: %w", c.name, t.name, i+1, err)
				}
			}
			var secs float64
			var rss int64
			if t.measure != nil {
				secs, rss, err = t.measure(ctx, i)
			} else {
				secs, rss, err = timed(ctx, t.cmd(i))
			}
			if err != nil {
				return row{}, fmt.Errorf("%s: %s run %d: %w", c.name, t.name, i+1, err)
			}
			r := res[t.name]
			if r == nil {
				r = &result{}
				res[t.name] = r
			}
			r.secs, r.rss = append(r.secs, secs), append(r.rss, rss)
			if t.after != nil {
				if err := t.after(i); err != nil {
					return row{}, fmt.Errorf("%s: after %s run %d: %w", c.name, t.name, i+1, err)
				}
			}
		}
		fmt.Fprintf(os.Stderr, "bench: %s: round %d/%d done\n", c.name, i+1, e.runs)
	}
	return row{c, tools, res}, nil
}

// printTable prints the medians as a Markdown table.
func printTable(rows []row, runs int) {
	fmt.Printf("\n%s, %d cores, %s, %d runs each, medians; ratio = distributor / peer\n\n",
		time.Now().UTC().Format("2006-01-02"), runtime.NumCPU(), runtime.Version(), runs)
	fmt.Println("| case | distributor | peak RSS | peers (ratio) |")
	fmt.Println("|---|---:|---:|---|")
	for _, r := range rows {
		d := r.res[r.tools[0].name]
		dm := median(d.secs)
		var peers []string
		for _, t := range r.tools[1:] {
			pr := r.res[t.name]
			pm := median(pr.secs)
			rss := ""
			if strings.HasPrefix(t.name, "distributor") {
				rss = fmt.Sprintf(", %d MB", medianInt(pr.rss)/1024)
			}
			peers = append(peers, fmt.Sprintf("%s %s (%.2f×%s)", t.name, secs(pm), dm/pm, rss))
		}
		if len(peers) == 0 {
			peers = []string{"—"}
		}
		fmt.Printf("| %s | %s | %d MB | %s |\n", r.c.title, secs(dm), medianInt(d.rss)/1024, strings.Join(peers, ", "))
	}
}

func secs(s float64) string {
	if s < 1 {
		return fmt.Sprintf("%.0f ms", s*1000)
	}
	return fmt.Sprintf("%.2f s", s)
}

func median(v []float64) float64 {
	s := slices.Clone(v)
	slices.Sort(s)
	return s[len(s)/2]
}

func medianInt(v []int64) int64 {
	s := slices.Clone(v)
	slices.Sort(s)
	return s[len(s)/2]
}

// timed runs argv (through the launcher: spawn.go) and returns its wall
// time and peak RSS (KiB).
func timed(ctx context.Context, argv []string) (float64, int64, error) {
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Stdout = io.Discard
	var stderr strings.Builder
	cmd.Stderr = &stderr

	// rclone 1.60 refuses to start with AWS_CA_BUNDLE set.
	cmd.Env = slices.DeleteFunc(os.Environ(), func(s string) bool { return strings.HasPrefix(s, "AWS_CA_BUNDLE=") })
	d, rss, err := spawned(cmd)
	if err != nil {
		return 0, 0, fmt.Errorf("%s: %v\n%s", strings.Join(argv, " "), err, stderr.String())
	}
	return d, rss, nil
}

// warm reads every file under dir so that each tool starts from a warm page
// cache. It is best effort: a file it cannot read is only read cold later.
func warm(dir string) {
	buf := make([]byte, 1<<20)
	_ = filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return nil
		}
		if f, err := os.Open(p); err == nil {
			_, _ = io.CopyBuffer(io.Discard, f, buf)
			f.Close()
		}
		return nil
	})
}

// buildBaseline builds distributor from a git revision.
func (e *env) buildBaseline(ctx context.Context, rev string) error {
	// A kept work folder may hold another revision's tree: files it has
	// and rev has not would break the build.
	src := filepath.Join(e.work, "baseline-src")
	if err := os.RemoveAll(src); err != nil {
		return err
	}
	if err := os.MkdirAll(src, 0o755); err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "bench: building distributor at %s\n", rev)
	sh := fmt.Sprintf("git archive %s | tar -x -C %s", rev, src)
	if out, err := exec.CommandContext(ctx, "sh", "-c", sh).CombinedOutput(); err != nil {
		return fmt.Errorf("%s: %v\n%s", sh, err, out)
	}
	bin := filepath.Join(e.work, "distributor-baseline")
	build := exec.CommandContext(ctx, "go", "build", "-o", bin, "./cmd/distributor")
	build.Dir = src
	if out, err := build.CombinedOutput(); err != nil {
		return fmt.Errorf("go build at %s: %v\n%s", rev, err, out)
	}
	e.dists = append(e.dists, dist{name: "distributor@" + rev, bin: bin, tag: "baseline"})
	return nil
}

// --- data ---

// writeTree writes n files of size bytes under dir, contents from seed.
func writeTree(dir string, n int, size int, seed uint64) error {
	rng := rand.New(rand.NewPCG(seed, 1))
	buf := make([]byte, size)
	for i := range n {
		fillRandom(rng, buf)
		p := filepath.Join(dir, fmt.Sprintf("dir%02d", i%50), fmt.Sprintf("file%06d.bin", i))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(p, buf, 0o644); err != nil {
			return err
		}
	}
	return nil
}

func fillRandom(rng *rand.Rand, b []byte) {
	for i := 0; i+8 <= len(b); i += 8 {
		v := rng.Uint64()
		for j := range 8 {
			b[i+j] = byte(v >> (8 * j))
		}
	}
}

// copyTree copies src to dst (cp -a), untimed.
func copyTree(src, dst string) error {
	out, err := exec.Command("cp", "-a", src, dst).CombinedOutput()
	if err != nil {
		return fmt.Errorf("cp -a %s %s: %v: %s", src, dst, err, out)
	}
	return nil
}

func (e *env) bundleCreate(dir, id string, created time.Time) error {
	out, err := exec.Command(e.dists[0].bin, "bundle", "create", dir, "--id", id, "--created", created.Format(time.RFC3339)).CombinedOutput()
	if err != nil {
		return fmt.Errorf("bundle create %s: %v: %s", dir, err, out)
	}
	return nil
}

// config writes a configuration publishing pipeline bench.p to a local
// destination at target with the workflow, and returns its path.
func (e *env) config(name, target, workflow string) (string, error) {
	p := filepath.Join(e.work, "configs", name+".yaml")
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return "", err
	}
	yaml := fmt.Sprintf("pipelines:\n  - id: bench.p\n    destinations: [site]\ndestinations:\n  - id: site\n    backend: local\n    path: %s\n    workflow: %s\n", target, workflow)
	return p, os.WriteFile(p, []byte(yaml), 0o644)
}

func (d dist) apply(cfg, bundle string) []string {
	return []string{d.bin, "apply", "--config", cfg, "--pipeline", "bench.p", "--bundle", bundle}
}

func (e *env) caseDir(name string) string { return filepath.Join(e.work, name) }

// target returns the i-th target folder of a tool in a case.
func (e *env) target(c, t string, i int) string {
	return filepath.Join(e.caseDir(c), "t", fmt.Sprintf("%s-%d", t, i))
}

var created = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// --- cases ---

func allCases() []caseDef {
	return append([]caseDef{
		{name: "first-small", title: "first publish 10,000 × 4 KiB", setup: firstPublish("first-small", 10_000, 4<<10)},
		{name: "first-large", title: "first publish 20 × 64 MiB", setup: firstPublish("first-large", 20, 64<<20)},
		{name: "republish", title: "republish, 1 % of 10,000 changed (unchanged files copied, mtimes kept)", setup: republish("republish", 100, false)},
		{name: "republish-rewritten", title: "republish, 1 % of 10,000 changed (every file rewritten, new mtimes)", setup: republish("republish-rewritten", 100, true)},
		{name: "nochange", title: "republish, nothing changed", setup: republish("nochange", 0, false)},
		{name: "serve-nochange", title: "republish, nothing changed, through `serve` (announce → published result)", setup: serveNochange},
		{name: "remove10", title: "replacement removing 10 % of 10,000", setup: remove10},
		{name: "catalog100k", title: "catalog of 100,000 outputs, publish adding 10", setup: bigCatalog("catalog100k", 100_000)},
		{name: "catalog1m", title: "catalog of 1,000,000 outputs, publish adding 10", huge: true, setup: bigCatalog("catalog1m", 1_000_000)},
		{name: "catalog1m-rep1k", title: "catalog of 1,000,000 outputs, replacement republish of one owner's 1,000 (all changed)", huge: true, setup: bigReplace("catalog1m", 1_000_000, 1_000)},
		{name: "status100k", title: "status (--no-leftovers) of the catalog100k root", setup: bigStatus("catalog100k", 100_000)},
		{name: "status1m", title: "status (--no-leftovers) of the catalog1m root", huge: true, setup: bigStatus("catalog1m", 1_000_000)},
	}, s3Cases()...)
}

// firstPublish: every tool copies the bundle into a fresh empty folder.
func firstPublish(name string, n, size int) func(e *env) ([]tool, error) {
	return func(e *env) ([]tool, error) {
		src := filepath.Join(e.caseDir(name), "src")
		if err := writeTree(src, n, size, uint64(n)); err != nil {
			return nil, err
		}
		if err := e.bundleCreate(src, "bench."+name, created); err != nil {
			return nil, err
		}
		mk := func(t string) func(int) error {
			return func(i int) error { return os.MkdirAll(e.target(name, t, i), 0o755) }
		}

		// Large targets are removed right after their run: 20 big files
		// are not the many-small-files case that slows the next creations.
		drop := func(t string) func(int) error {
			if size < 1<<20 {
				return nil
			}
			return func(i int) error { return os.RemoveAll(e.target(name, t, i)) }
		}
		var tools []tool
		for _, d := range e.dists {
			var cfgs []string
			for i := range e.runs {
				cfg, err := e.config(fmt.Sprintf("%s-%s-%d", name, d.tag, i), e.target(name, d.tag, i), "replacement")
				if err != nil {
					return nil, err
				}
				cfgs = append(cfgs, cfg)
			}
			tools = append(tools, tool{name: d.name, prepare: mk(d.tag), after: drop(d.tag),
				cmd: func(i int) []string { return d.apply(cfgs[i], src) }})
		}
		if p, ok := e.peers["cp"]; ok {
			tools = append(tools, tool{name: "cp -r", prepare: mk("cp"), after: drop("cp"),
				cmd: func(i int) []string { return []string{p, "-r", src + "/.", e.target(name, "cp", i)} }})
			if s, ok := e.peers["sync"]; ok {
				// cp, then a flush like distributor's, for a durable copy.
				tools = append(tools, tool{name: "cp -r; sync", prepare: mk("cpsync"), after: drop("cpsync"),
					cmd: func(i int) []string {
						return []string{"sh", "-c", fmt.Sprintf("%s -r %s/. %s && %s", p, src, e.target(name, "cpsync", i), s)}
					}})
			}
		}
		if p, ok := e.peers["rsync"]; ok {
			tools = append(tools, tool{name: "rsync -a", prepare: mk("rsync"), after: drop("rsync"),
				cmd: func(i int) []string { return []string{p, "-a", src + "/", e.target(name, "rsync", i) + "/"} }})
		}
		if p, ok := e.peers["rclone"]; ok {
			tools = append(tools, tool{name: "rclone copy", prepare: mk("rclone"), after: drop("rclone"),
				cmd: func(i int) []string { return rclone(p, "copy", src, e.target(name, "rclone", i)) }})
		}
		return tools, nil
	}
}

func rclone(path, verb, src, dst string, extra ...string) []string {
	return append([]string{path, verb, src, dst, "--config", "/dev/null", "--exclude", "/" + "manifest.json"}, extra...)
}

// changeFiles rewrites every step-th file of a tree in place (same size).
func changeFiles(dir string, n, step, size int, seed uint64) error {
	rng := rand.New(rand.NewPCG(seed, 2))
	buf := make([]byte, size)
	for i := 0; i < n; i += step {
		fillRandom(rng, buf)
		p := filepath.Join(dir, fmt.Sprintf("dir%02d", i%50), fmt.Sprintf("file%06d.bin", i))
		if err := os.WriteFile(p, buf, 0o644); err != nil {
			return err
		}
	}
	return nil
}

// republish: one target per tool that every run republishes into, A → B →
// A → … (each step changes the same 1 %), or A again and again. B is A
// copied (cp -a: the unchanged files keep A's mtimes, as a producer that
// copies them leaves them), or with rewritten, A written again: the same
// bytes, but every file has a new mtime (a producer that writes all its
// files each time), which the peers' size-and-mtime check does not pass.
func republish(name string, step int, rewritten bool) func(e *env) ([]tool, error) {
	const n, size = 10_000, 4 << 10
	return func(e *env) ([]tool, error) {
		a := filepath.Join(e.caseDir(name), "src")
		b := filepath.Join(e.caseDir(name), "src-b")
		if err := writeTree(a, n, size, n); err != nil {
			return nil, err
		}
		if err := e.bundleCreate(a, "bench."+name, created); err != nil {
			return nil, err
		}
		if rewritten {
			// Later mtimes than A's, whatever the clock's resolution.
			time.Sleep(10 * time.Millisecond)
			if err := writeTree(b, n, size, n); err != nil {
				return nil, err
			}
		} else if err := copyTree(a, b); err != nil {
			return nil, err
		}
		if step > 0 {
			if err := changeFiles(b, n, step, size, 7); err != nil {
				return nil, err
			}
		}
		if err := e.bundleCreate(b, "bench."+name, created.Add(time.Hour)); err != nil {
			return nil, err
		}

		// Both bundles alternate: each run is a republish that changes
		// what B changes (nothing when step is 0).
		from := func(i int) string {
			if i%2 == 0 {
				return b
			}
			return a
		}
		var tools []tool
		for _, d := range e.dists {
			dt := e.target(name, d.tag, 0)
			cfg, err := e.config(name+"-"+d.tag, dt, "replacement")
			if err != nil {
				return nil, err
			}
			tools = append(tools, tool{name: d.name, prepare: onceAt0(func() error {
				if err := os.MkdirAll(dt, 0o755); err != nil {
					return err
				}
				_, _, err := timed(context.Background(), d.apply(cfg, a))
				return err
			}), cmd: func(i int) []string {
				// --allow-older: going back to A is a roll back.
				return append(d.apply(cfg, from(i)), "--allow-older")
			}})
		}
		seeded := func(t string) func(int) error {
			return onceAt0(func() error { return copyTree(a, e.target(name, t, 0)) })
		}
		if p, ok := e.peers["rsync"]; ok {
			tools = append(tools,
				tool{name: "rsync -a", prepare: seeded("rsync"), cmd: func(i int) []string {
					return []string{p, "-a", "--delete", from(i) + "/", e.target(name, "rsync", 0) + "/"}
				}},
				tool{name: "rsync -a --checksum", prepare: seeded("rsyncc"), cmd: func(i int) []string {
					return []string{p, "-a", "--delete", "--checksum", from(i) + "/", e.target(name, "rsyncc", 0) + "/"}
				}})
		}
		if p, ok := e.peers["rclone"]; ok {
			tools = append(tools,
				tool{name: "rclone sync", prepare: seeded("rclone"), cmd: func(i int) []string {
					return rclone(p, "sync", from(i), e.target(name, "rclone", 0))
				}},
				tool{name: "rclone sync --checksum", prepare: seeded("rclonec"), cmd: func(i int) []string {
					return rclone(p, "sync", from(i), e.target(name, "rclonec", 0), "--checksum")
				}})
		}
		return tools, nil
	}
}

func onceAt0(f func() error) func(int) error {
	return func(i int) error {
		if i != 0 {
			return nil
		}
		return f()
	}
}

// remove10: each timed run goes from A to C (A without every tenth file);
// an untimed run puts A back.
func remove10(e *env) ([]tool, error) {
	const name, n, size = "remove10", 10_000, 4 << 10
	a := filepath.Join(e.caseDir(name), "src")
	c := filepath.Join(e.caseDir(name), "src-c")
	if err := writeTree(a, n, size, n); err != nil {
		return nil, err
	}
	if err := e.bundleCreate(a, "bench."+name, created); err != nil {
		return nil, err
	}
	if err := copyTree(a, c); err != nil {
		return nil, err
	}
	for i := 0; i < n; i += 10 {
		if err := os.Remove(filepath.Join(c, fmt.Sprintf("dir%02d", i%50), fmt.Sprintf("file%06d.bin", i))); err != nil {
			return nil, err
		}
	}
	if err := e.bundleCreate(c, "bench."+name, created.Add(time.Hour)); err != nil {
		return nil, err
	}
	restore := func(argv []string) func(int) error {
		return func(int) error { _, _, err := timed(context.Background(), argv); return err }
	}
	var tools []tool
	for _, d := range e.dists {
		dt := e.target(name, d.tag, 0)
		cfg, err := e.config(name+"-"+d.tag, dt, "replacement")
		if err != nil {
			return nil, err
		}
		tools = append(tools, tool{name: d.name,
			prepare: onceAt0(func() error {
				if err := os.MkdirAll(dt, 0o755); err != nil {
					return err
				}
				return restore(d.apply(cfg, a))(0)
			}),
			cmd:   func(int) []string { return d.apply(cfg, c) },
			after: restore(append(d.apply(cfg, a), "--allow-older")),
		})
	}
	seeded := func(t string) func(int) error {
		return onceAt0(func() error { return copyTree(a, e.target(name, t, 0)) })
	}
	if p, ok := e.peers["rsync"]; ok {
		t := e.target(name, "rsync", 0)
		tools = append(tools, tool{name: "rsync -a --delete", prepare: seeded("rsync"),
			cmd:   func(int) []string { return []string{p, "-a", "--delete", c + "/", t + "/"} },
			after: restore([]string{p, "-a", a + "/", t + "/"})})
	}
	if p, ok := e.peers["rclone"]; ok {
		t := e.target(name, "rclone", 0)
		tools = append(tools, tool{name: "rclone sync", prepare: seeded("rclone"),
			cmd:   func(int) []string { return rclone(p, "sync", c, t) },
			after: restore(rclone(p, "copy", a, t))})
	}
	return tools, nil
}

// bigCatalog: a root that distributor itself published n outputs into
// (empty files of pipeline bench.big, with the catalog and the
// .distributor/ files a real root has), into which every timed run
// publishes a new 10-file bundle of pipeline bench.p (additive, new paths
// each run).
func bigCatalog(name string, n int) func(e *env) ([]tool, error) {
	return func(e *env) ([]tool, error) {
		peerRoot := filepath.Join(e.caseDir(name), "peer-root")
		if err := os.MkdirAll(peerRoot, 0o755); err != nil {
			return nil, err
		}
		if err := e.prepared(peerRoot, func() error { return writeTree(peerRoot, n, 0, 1) }, nil); err != nil { // the same files, no catalog
			return nil, err
		}

		// One fresh 10-file bundle per tool and run, under its own folder.
		srcs := map[string][]string{}
		tags := []string{"rsync", "cp"}
		for _, d := range e.dists {
			tags = append(tags, d.tag)
		}
		for _, t := range tags {
			for i := range e.runs {
				d := filepath.Join(e.caseDir(name), "src", fmt.Sprintf("%s-%d", t, i))
				if err := os.RemoveAll(d); err != nil { // a -reuse run's old bundle
					return nil, err
				}
				if err := writeTree(filepath.Join(d, fmt.Sprintf("add-%s-%d", t, i)), 10, 4<<10, uint64(i)); err != nil {
					return nil, err
				}
				if err := e.bundleCreate(d, fmt.Sprintf("bench.add.%d", i), created.Add(time.Duration(i)*time.Second)); err != nil {
					return nil, err
				}
				srcs[t] = append(srcs[t], d)
			}
		}
		var tools []tool
		for _, d := range e.dists {
			// Each build publishes into its own root, which it published.
			cfg, err := e.bigRoot(name, n, d)
			if err != nil {
				return nil, err
			}
			tools = append(tools, tool{name: d.name, cmd: func(i int) []string { return d.apply(cfg, srcs[d.tag][i]) }})
		}
		if p, ok := e.peers["rsync"]; ok {
			tools = append(tools, tool{name: "rsync -a", cmd: func(i int) []string {
				return []string{p, "-a", srcs["rsync"][i] + "/", peerRoot + "/"}
			}})
		}
		if p, ok := e.peers["cp"]; ok {
			tools = append(tools, tool{name: "cp -r", cmd: func(i int) []string {
				return []string{p, "-r", srcs["cp"][i] + "/.", peerRoot}
			}})
		}
		return tools, nil
	}
}

// bigReplace: in the root of case name (n outputs of pipeline bench.big),
// pipeline bench.r republishes its m outputs with replacement, every one
// changed: bundles A and B (the same paths, other bytes) alternate, A
// published untimed first.
func bigReplace(name string, n, m int) func(e *env) ([]tool, error) {
	return func(e *env) ([]tool, error) {
		var srcs [2]string
		for k := range srcs {
			srcs[k] = filepath.Join(e.caseDir(name), fmt.Sprintf("rep-%c", 'a'+k))
			if err := e.once(srcs[k], func() error {
				if err := writeTree(filepath.Join(srcs[k], "rep"), m, 4<<10, uint64(10+k)); err != nil {
					return err
				}
				return e.bundleCreate(srcs[k], "bench.rep", created.Add(time.Duration(k)*time.Hour))
			}); err != nil {
				return nil, err
			}
		}
		var tools []tool
		for _, d := range e.dists {
			if _, err := e.bigRoot(name, n, d); err != nil {
				return nil, err
			}
			cfg, err := e.replaceConfig(name+"-rep-"+d.tag, filepath.Join(e.caseDir(name), "root-"+d.tag))
			if err != nil {
				return nil, err
			}
			apply := func(src string) []string {
				return []string{d.bin, "apply", "--config", cfg, "--pipeline", "bench.r", "--bundle", src, "--allow-older"}
			}
			tools = append(tools, tool{name: d.name,
				prepare: onceAt0(func() error { _, _, err := timed(context.Background(), apply(srcs[0])); return err }),
				cmd:     func(i int) []string { return apply(srcs[(i+1)%2]) }})
		}
		return tools, nil
	}
}

// replaceConfig writes the configuration of bigReplace: pipeline bench.r
// publishes to destination site at root with replacement (bench.big's
// records there are another owner's).
func (e *env) replaceConfig(name, root string) (string, error) {
	p := filepath.Join(e.work, "configs", name+".yaml")
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return "", err
	}
	yaml := fmt.Sprintf("pipelines:\n  - id: bench.r\n    destinations: [site]\n"+
		"destinations:\n  - id: site\n    backend: local\n    path: %s\n    workflow: replacement\n", root)
	return p, os.WriteFile(p, []byte(yaml), 0o644)
}

// bigStatus: each build's status (without the leftovers walk) of the
// root of case name, whose catalog holds n outputs.
func bigStatus(name string, n int) func(e *env) ([]tool, error) {
	return func(e *env) ([]tool, error) {
		var tools []tool
		for _, d := range e.dists {
			cfg, err := e.bigRoot(name, n, d)
			if err != nil {
				return nil, err
			}
			tools = append(tools, tool{name: d.name, cmd: func(int) []string { return []string{d.bin, "status", "--config", cfg, "--no-leftovers"} }})
		}
		return tools, nil
	}
}

// bigRoot has build d publish the bundle of n outputs (pipeline
// bench.big, written once) untimed into its root of case name, and
// returns the root's configuration.
func (e *env) bigRoot(name string, n int, d dist) (string, error) {
	bigSrc := filepath.Join(e.caseDir(name), "big-src")
	if err := e.once(bigSrc, func() error {
		if err := writeTree(bigSrc, n, 0, 1); err != nil {
			return err
		}
		return e.bundleCreate(bigSrc, "bench.big", created)
	}); err != nil {
		return "", err
	}
	root := filepath.Join(e.caseDir(name), "root-"+d.tag)
	cfg, err := e.bigConfig(name+"-"+d.tag, root)
	if err != nil {
		return "", err
	}
	return cfg, e.publishedRoot(root, d, cfg, bigSrc)
}

// bigConfig writes the configuration of a big-catalog root: pipelines
// bench.big (the n outputs) and bench.p (the timed runs) both publish to
// destination site at root, additive.
func (e *env) bigConfig(name, root string) (string, error) {
	p := filepath.Join(e.work, "configs", name+".yaml")
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return "", err
	}
	yaml := fmt.Sprintf("pipelines:\n  - id: bench.big\n    destinations: [site]\n  - id: bench.p\n    destinations: [site]\n"+
		"destinations:\n  - id: site\n    backend: local\n    path: %s\n    workflow: additive\n", root)
	return p, os.WriteFile(p, []byte(yaml), 0o644)
}

// publishedRoot has build d publish the bundle at src (pipeline
// bench.big) into a new root, untimed, and keeps what it wrote beside the
// outputs (the catalog, .distributor/) in root.state. With -reuse, when
// an earlier run prepared root, it resets root instead: what the timed
// runs added is removed (everything but the dirNN folders) and the kept
// state is put back.
func (e *env) publishedRoot(root string, d dist, cfg, src string) error {
	state := root + ".state"
	return e.prepared(root, func() error {
		if err := os.RemoveAll(root); err != nil {
			return err
		}
		if err := os.MkdirAll(root, 0o755); err != nil {
			return err
		}
		fmt.Fprintf(os.Stderr, "bench: %s publishes the big bundle into %s\n", d.name, root)
		argv := []string{d.bin, "apply", "--config", cfg, "--pipeline", "bench.big", "--bundle", src}
		if help, _ := exec.Command(d.bin, "apply", "--help").CombinedOutput(); strings.Contains(string(help), "--timeout") {
			argv = append(argv, "--timeout", "24h") // a million files take longer than the default
		}
		if out, err := exec.Command(argv[0], argv[1:]...).CombinedOutput(); err != nil {
			return fmt.Errorf("%s: %v\n%s", strings.Join(argv, " "), err, out)
		}
		if err := os.RemoveAll(state); err != nil {
			return err
		}
		if err := os.MkdirAll(state, 0o755); err != nil {
			return err
		}
		for _, f := range []string{catalog.FileName, ".distributor"} {
			if err := copyTree(filepath.Join(root, f), filepath.Join(state, f)); err != nil {
				return err
			}
		}
		return nil
	}, func() error {
		// After a fresh publication the state is already in place.
		if _, err := os.Stat(filepath.Join(root, catalog.FileName)); err == nil {
			return nil
		}
		for _, f := range []string{catalog.FileName, ".distributor"} {
			if err := copyTree(filepath.Join(state, f), filepath.Join(root, f)); err != nil {
				return err
			}
		}
		return nil
	})
}

// once makes dir with build, or with -reuse keeps it as an earlier run
// made it.
func (e *env) once(dir string, build func() error) error {
	mark := dir + ".prepared"
	if _, err := os.Stat(mark); e.reuse && err == nil {
		fmt.Fprintf(os.Stderr, "bench: reusing %s\n", dir)
		return nil
	}
	if err := os.RemoveAll(dir); err != nil {
		return err
	}
	if err := build(); err != nil {
		return err
	}
	return os.WriteFile(mark, nil, 0o644)
}

// prepared fills folder dir with files, then cat (if not nil). With -reuse,
// when an earlier run finished preparing dir, it resets dir instead: what
// the timed runs added is removed (everything but the dirNN folders) and
// only cat runs again (quick; the files stay).
func (e *env) prepared(dir string, files, cat func() error) error {
	mark := dir + ".prepared"
	if _, err := os.Stat(mark); e.reuse && err == nil {
		ents, err := os.ReadDir(dir)
		if err != nil {
			return err
		}
		for _, d := range ents {
			if strings.HasPrefix(d.Name(), "dir") && d.IsDir() {
				continue
			}
			if err := os.RemoveAll(filepath.Join(dir, d.Name())); err != nil {
				return err
			}
		}
		fmt.Fprintf(os.Stderr, "bench: reusing %s\n", dir)
	} else if err := files(); err != nil {
		return err
	}
	if cat != nil {
		if err := cat(); err != nil {
			return err
		}
	}
	return os.WriteFile(mark, nil, 0o644)
}
