package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/distributor/distributor/bundle"
	"github.com/distributor/distributor/events"
)

// serveNochange is the nochange case through `distributor serve`: each
// build serves a root of its own from its embedded NATS server, and a
// timed run is the time from announcing the next bundle to its published
// result event, as a producer waiting for it sees it. The bundles
// alternate, so every run after the untimed first is a new version whose
// bytes all stay the same; they are announced as an operator's, with
// allow_older (going back to A is a roll back). The peers are the nochange
// case's one-shot republishes.
func serveNochange(e *env) ([]tool, error) {
	const name = "serve-nochange"
	tools, err := republish(name, 0, false)(e)
	if err != nil {
		return nil, err
	}
	a, b := filepath.Join(e.caseDir(name), "src"), filepath.Join(e.caseDir(name), "src-b")
	if err := os.MkdirAll(filepath.Join(e.caseDir(name), "t"), 0o755); err != nil { // the peers' targets
		return nil, err
	}
	for i, d := range e.dists { // republish lists the builds first, in order
		s := &served{dist: d, dir: filepath.Join(e.caseDir(name), "serve-"+d.tag), digests: map[string]string{}}
		tools[i] = tool{name: d.name,
			prepare: onceAt0(func() error { return s.start(a) }),
			measure: func(ctx context.Context, i int) (float64, int64, error) {
				if i%2 == 0 {
					return s.publish(ctx, b)
				}
				return s.publish(ctx, a)
			},
			done: s.stop}
	}
	return tools, nil
}

// served is one build's `distributor serve` and a client of its NATS.
type served struct {
	dist    dist
	dir     string
	cmd     *exec.Cmd
	nc      *nats.Conn
	pub     *events.Publisher
	results chan events.Result
	digests map[string]string // bundle folder → manifest digest
}

// start runs serve on a root of its own and publishes first, untimed.
func (s *served) start(first string) error {
	root := filepath.Join(s.dir, "root")
	if err := os.MkdirAll(root, 0o755); err != nil {
		return err
	}
	port, err := freePort()
	if err != nil {
		return err
	}
	cfg := filepath.Join(s.dir, "distributor.yaml")
	yaml := fmt.Sprintf("nats:\n  listen: 127.0.0.1:%d\n  store_dir: %s\nhttp:\n  listen: \"off\"\n"+
		"pipelines:\n  - id: bench.p\n    destinations: [site]\n"+
		"destinations:\n  - id: site\n    backend: local\n    path: %s\n    workflow: replacement\n",
		port, filepath.Join(s.dir, "nats"), root)
	if err := os.WriteFile(cfg, []byte(yaml), 0o644); err != nil {
		return err
	}
	logFile, err := os.Create(filepath.Join(s.dir, "serve.log"))
	if err != nil {
		return err
	}
	defer logFile.Close() // the child holds its own descriptor
	s.cmd = exec.Command(s.dist.bin, "serve", "--config", cfg)
	s.cmd.Stdout, s.cmd.Stderr = logFile, logFile
	if err := s.cmd.Start(); err != nil {
		return err
	}
	if err := s.connect("nats://127.0.0.1:" + strconv.Itoa(port)); err != nil {
		return fmt.Errorf("%s serve (log: %s): %w", s.dist.name, logFile.Name(), err)
	}
	_, _, err = s.publish(context.Background(), first)
	return err
}

// connect waits for serve's streams and subscribes to the results.
func (s *served) connect(url string) error {
	ctx := context.Background()
	deadline := time.Now().Add(30 * time.Second)
	for {
		nc, err := nats.Connect(url, nats.Timeout(time.Second))
		if err == nil {
			js, jerr := jetstream.New(nc)
			if jerr == nil {
				_, jerr = js.Stream(ctx, events.Subjects{}.BundlesStream())
			}
			if jerr == nil {
				s.nc, s.pub = nc, events.NewPublisher(js, events.Subjects{})
				break
			}
			nc.Close()
			err = jerr
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("not ready after 30 s: %w", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	s.results = make(chan events.Result, 16)
	_, err := s.nc.Subscribe(events.Subjects{}.ResultFilter("", "", ""), func(m *nats.Msg) {
		if r, err := events.DecodeResult(m.Data); err == nil {
			s.results <- r
		}
	})
	return err
}

// publish announces the bundle in folder and waits for its published
// result; it returns the time between and serve's peak RSS so far (KiB).
func (s *served) publish(ctx context.Context, folder string) (float64, int64, error) {
	digest, ok := s.digests[folder]
	if !ok {
		data, err := os.ReadFile(filepath.Join(folder, bundle.ManifestName))
		if err != nil {
			return 0, 0, err
		}
		digest = bundle.Digest(data)
		s.digests[folder] = digest
	}
	ev := events.BundleReady{ID: events.NewEventID(), PipelineID: "bench.p", Bundle: folder, ManifestDigest: digest, AllowOlder: true}
	start := time.Now()
	if _, _, err := s.pub.AnnounceAsOperator(ctx, ev); err != nil {
		return 0, 0, err
	}
	timeout := time.After(2 * time.Minute)
	for {
		select {
		case r := <-s.results:
			if r.BundleEventID != ev.ID {
				continue
			}
			secs := time.Since(start).Seconds()
			if r.Type != events.TypePublished {
				return 0, 0, fmt.Errorf("%s: %s: %s", s.dist.name, r.Type, r.Message)
			}
			return secs, processPeakRSS(s.cmd.Process.Pid), nil
		case <-timeout:
			return 0, 0, fmt.Errorf("%s: no result for %s within 2 minutes (log: %s)", s.dist.name, folder, filepath.Join(s.dir, "serve.log"))
		}
	}
}

// stop ends serve as a shutdown signal does.
func (s *served) stop() error {
	if s.nc != nil {
		s.nc.Close()
	}
	if s.cmd == nil || s.cmd.Process == nil {
		return nil
	}
	_ = s.cmd.Process.Signal(os.Interrupt)
	done := make(chan error, 1)
	go func() { done <- s.cmd.Wait() }()
	select {
	case err := <-done:
		var exit *exec.ExitError
		if errors.As(err, &exit) {
			return nil // stopped by the signal
		}
		return err
	case <-time.After(20 * time.Second):
		_ = s.cmd.Process.Kill()
		return fmt.Errorf("%s serve did not stop within 20 s; killed", s.dist.name)
	}
}

// freePort is a loopback port no one listens on now.
func freePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}

// processPeakRSS is a running process's peak resident set in KiB
// (VmHWM), 0 where /proc does not tell.
func processPeakRSS(pid int) int64 {
	data, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "status"))
	if err != nil {
		return 0
	}
	for line := range strings.SplitSeq(string(data), "\n") {
		if v, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			return kb
		}
	}
	return 0
}
