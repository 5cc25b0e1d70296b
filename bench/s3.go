package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
)

// rcloneRemote is the rclone remote the S3 cases define through
// RCLONE_CONFIG_* variables.
const rcloneRemote = "benchs3"

// s3Server is a running local S3 server (bench/s3server).
type s3Server struct {
	url string

	// stdin keeps the server running: it stops when stdin closes (also
	// when a collected pipe is finalized, so it is held here).
	stdin io.WriteCloser
}

func s3Cases() []caseDef {
	return []caseDef{
		{name: "s3-first-small", title: "S3: first publish 10,000 × 4 KiB", setup: s3First("s3-first-small", 10_000, 4<<10)},
		{name: "s3-first-large", title: "S3: first publish 20 × 64 MiB", setup: s3First("s3-first-large", 20, 64<<20)},
		{name: "s3-republish", title: "S3: republish, 1 % of 10,000 changed", setup: s3Republish("s3-republish", 100)},
		{name: "s3-nochange", title: "S3: republish, nothing changed", setup: s3Republish("s3-nochange", 0)},
	}
}

// startS3 builds and starts bench/s3server; it runs until this process
// ends (its stdin closes).
func startS3(e *env) (*s3Server, error) {
	bin := filepath.Join(e.work, "s3server")
	if out, err := exec.Command("go", "build", "-o", bin, "./bench/s3server").CombinedOutput(); err != nil {
		return nil, fmt.Errorf("go build ./bench/s3server: %v: %s", err, out)
	}
	cmd := exec.Command(bin)
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil {
		return nil, fmt.Errorf("s3server did not start: %w", err)
	}
	return &s3Server{url: strings.TrimSpace(line), stdin: stdin}, nil
}

// admin creates (op "create") or drops (op "drop", with its objects) a
// bucket, or collects the server's garbage (op "gc", no bucket).
func (s *s3Server) admin(op, bucket string) error {
	resp, err := http.Post(s.url+"/_bench/"+op+"?bucket="+bucket, "text/plain", nil)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	msg, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s bucket %s: %s: %s", op, bucket, resp.Status, msg)
	}
	return nil
}

// settle has the server collect the garbage of earlier runs and return the
// memory freed (POST /_bench/gc) before a timed run: the server's
// collections, sweeps and returns of memory otherwise land in whichever
// run comes along, and with runs in a fixed rotation the same tool keeps
// paying for another's garbage.
func (s *s3Server) settle(int) error { return s.admin("gc", "") }

// s3Setup starts the case's server, or says why the case is skipped (nil).
func s3Setup(e *env, name string) *s3Server {
	s, err := startS3(e)
	if err != nil {
		fmt.Fprintf(os.Stderr, "bench: %s: skipped: cannot start a local S3 server (%v)\n", name, err)
		return nil
	}
	return s
}

// env prefixes argv with the variables that point distributor (AWS SDK)
// and rclone (remote benchs3:) at the server.
func (s *s3Server) env(argv []string) []string {
	vars := []string{
		"AWS_ACCESS_KEY_ID=bench", "AWS_SECRET_ACCESS_KEY=benchsecret", "AWS_REGION=us-east-1",
		"AWS_EC2_METADATA_DISABLED=true",
		"RCLONE_CONFIG_BENCHS3_TYPE=s3", "RCLONE_CONFIG_BENCHS3_PROVIDER=Other",
		"RCLONE_CONFIG_BENCHS3_ENDPOINT=" + s.url, "RCLONE_CONFIG_BENCHS3_REGION=us-east-1",
		"RCLONE_CONFIG_BENCHS3_ACCESS_KEY_ID=bench", "RCLONE_CONFIG_BENCHS3_SECRET_ACCESS_KEY=benchsecret",
		"RCLONE_CONFIG_BENCHS3_FORCE_PATH_STYLE=true",
	}
	return append(append([]string{"env"}, vars...), argv...)
}

// config writes a configuration publishing pipeline bench.p to bucket.
func (s *s3Server) config(e *env, name, bucket, workflow string) (string, error) {
	p := filepath.Join(e.work, "configs", name+".yaml")
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return "", err
	}
	yaml := fmt.Sprintf("pipelines:\n  - id: bench.p\n    destinations: [site]\ndestinations:\n"+
		"  - id: site\n    backend: s3\n    bucket: %s\n    endpoint: %s\n    path_style: true\n    workflow: %s\n",
		bucket, s.url, workflow)
	return p, os.WriteFile(p, []byte(yaml), 0o644)
}

// s3First: every tool publishes the bundle into a fresh empty bucket.
func s3First(name string, n, size int) func(e *env) ([]tool, error) {
	return func(e *env) ([]tool, error) {
		s := s3Setup(e, name)
		if s == nil {
			return nil, nil
		}
		src := filepath.Join(e.caseDir(name), "src")
		if err := writeTree(src, n, size, uint64(n)); err != nil {
			return nil, err
		}
		if err := e.bundleCreate(src, "bench."+name, created); err != nil {
			return nil, err
		}
		bucket := func(t string, i int) string { return fmt.Sprintf("%s-%s-%d", name, t, i) }
		mk := func(t string) func(int) error {
			return func(i int) error { return s.admin("create", bucket(t, i)) }
		}
		drop := func(t string) func(int) error {
			return func(i int) error { return s.admin("drop", bucket(t, i)) }
		}
		var tools []tool
		for _, d := range e.dists {
			var cfgs []string
			for i := range e.runs {
				cfg, err := s.config(e, fmt.Sprintf("%s-%s-%d", name, d.tag, i), bucket(d.tag, i), "replacement")
				if err != nil {
					return nil, err
				}
				cfgs = append(cfgs, cfg)
			}
			tools = append(tools, tool{name: d.name, prepare: mk(d.tag), after: drop(d.tag), before: s.settle,
				cmd: func(i int) []string { return s.env(d.apply(cfgs[i], src)) }})
		}
		if p, ok := e.peers["rclone"]; ok {
			tools = append(tools, tool{name: "rclone copy", prepare: mk("rclone"), after: drop("rclone"), before: s.settle,
				cmd: func(i int) []string {
					return s.env(rclone(p, "copy", src, rcloneRemote+":"+bucket("rclone", i)))
				}})
		}
		return tools, nil
	}
}

// abBundles writes bundle A (n × size) and bundle B, which changes every
// step-th file of A (none when step is 0), under the case folder.
func abBundles(e *env, name string, n, size, step int) (a, b string, err error) {
	a = filepath.Join(e.caseDir(name), "src")
	b = filepath.Join(e.caseDir(name), "src-b")
	if err := writeTree(a, n, size, uint64(n)); err != nil {
		return "", "", err
	}
	if err := e.bundleCreate(a, "bench."+name, created); err != nil {
		return "", "", err
	}
	if err := copyTree(a, b); err != nil {
		return "", "", err
	}
	if step > 0 {
		if err := changeFiles(b, n, step, size, 7); err != nil {
			return "", "", err
		}
	}
	return a, b, e.bundleCreate(b, "bench."+name, created.Add(time.Hour))
}

// s3Republish: one bucket per tool, seeded with A untimed; the timed runs
// publish B, A, B, … into it (each changes the same files, or nothing).
func s3Republish(name string, step int) func(e *env) ([]tool, error) {
	const n, size = 10_000, 4 << 10
	return func(e *env) ([]tool, error) {
		s := s3Setup(e, name)
		if s == nil {
			return nil, nil
		}
		a, b, err := abBundles(e, name, n, size, step)
		if err != nil {
			return nil, err
		}
		from := func(i int) string {
			if i%2 == 0 {
				return b
			}
			return a
		}
		seed := func(bucket string, argv []string) func(int) error {
			return onceAt0(func() error {
				if err := s.admin("create", bucket); err != nil {
					return err
				}
				_, _, err := timed(context.Background(), s.env(argv))
				return err
			})
		}
		var tools []tool
		for _, d := range e.dists {
			bucket := name + "-" + d.tag
			cfg, err := s.config(e, name+"-"+d.tag, bucket, "replacement")
			if err != nil {
				return nil, err
			}
			tools = append(tools, tool{name: d.name, prepare: seed(bucket, d.apply(cfg, a)), before: s.settle,
				// --allow-older: going back to A is a roll back.
				cmd: func(i int) []string { return s.env(append(d.apply(cfg, from(i)), "--allow-older")) }})
		}
		if p, ok := e.peers["rclone"]; ok {
			dst := rcloneRemote + ":" + name + "-rclonec"
			tools = append(tools, tool{name: "rclone sync --checksum", before: s.settle,
				prepare: seed(name+"-rclonec", rclone(p, "copy", a, dst)),
				cmd:     func(i int) []string { return s.env(rclone(p, "sync", from(i), dst, "--checksum")) }})
		}
		return tools, nil
	}
}
