package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/distributor/distributor/config"
)

// healthCommand probes serve's HTTP listener from inside its container:
// scratch and distroless images have no curl or wget for a HEALTHCHECK.
func (a *app) healthCommand() *cobra.Command {
	var addr, path string
	var ready bool
	timeout := config.Duration(3 * time.Second)
	cmd := &cobra.Command{
		Use:   "health [--addr HOST:PORT] [--ready | --path PATH]",
		Short: "GET serve's /healthz (or /readyz, /metrics) and exit 0 on a 2xx answer, 1 otherwise: a container health check",
		Args:  noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if ready {
				if cmd.Flags().Changed("path") {
					return usageErr("--ready and --path: give one (--ready is --path /readyz)")
				}
				path = "/readyz"
			}
			if !cmd.Flags().Changed("addr") {
				var err error
				if addr, err = a.healthAddr(); err != nil {
					return err
				}
			}
			u, err := healthURL(addr, path)
			if err != nil {
				return err
			}
			if timeout <= 0 {
				return usageErr("--timeout %s: must be positive, e.g. 3s", timeout)
			}
			return a.health(cmd.Context(), u, time.Duration(timeout))
		},
	}
	cmd.Flags().StringVar(&addr, "addr", config.DefaultHTTPListen, "serve's HTTP address; without it, http.listen of --config when that file exists. A wildcard host (0.0.0.0, ::, none) is probed on loopback")
	cmd.Flags().StringVar(&path, "path", "/healthz", "path to GET: /healthz (alive), /readyz (ready for work) or /metrics")
	cmd.Flags().BoolVar(&ready, "ready", false, "probe /readyz: NATS connected, streams, lease bucket and durable consumer reachable, not draining")
	cmd.Flags().Var(&timeout, "timeout", "how long to wait for the answer, e.g. 3s")
	return cmd
}

// healthAddr is the address serve listens on with the same configuration:
// http.listen (after DISTRIBUTOR_* variables) when the file exists, else
// the default.
func (a *app) healthAddr() (string, error) {
	if _, err := os.Stat(a.configPath); err != nil {
		return config.DefaultHTTPListen, nil
	}
	cfg, err := a.loadConfig()
	if err != nil {
		return "", err
	}
	if cfg.HTTP.Listen == config.HTTPOff {
		return "", usageErr("http.listen is %q in %s: serve has no HTTP listener to probe; set http.listen or pass --addr", config.HTTPOff, a.configPath)
	}
	return cfg.HTTP.Listen, nil
}

// healthURL turns a listen address into the URL a local probe dials.
func healthURL(addr, path string) (string, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil || port == "" {
		return "", usageErr("--addr %q must be host:port, e.g. 127.0.0.1:9090", addr)
	}
	switch host {
	case "", "0.0.0.0":
		host = "127.0.0.1"
	case "::":
		host = "::1"
	}
	if !strings.HasPrefix(path, "/") {
		return "", usageErr("--path %q must start with /, e.g. /readyz", path)
	}
	return "http://" + net.JoinHostPort(host, port) + path, nil
}

func (a *app) health(ctx context.Context, u string, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return fmt.Errorf("health check %s: %w", u, err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("health check %s: %w (is serve running with its HTTP listener on this address? see serve --http-addr)", u, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		// /readyz gives its reason on the first line of the body.
		line, _ := bufio.NewReader(io.LimitReader(resp.Body, 4096)).ReadString('\n')
		if line = strings.TrimSpace(line); line != "" {
			line = ": " + line
		}
		return fmt.Errorf("health check %s: %s%s", u, resp.Status, line)
	}
	if _, err := io.Copy(a.stdout, resp.Body); err != nil {
		return fmt.Errorf("health check %s: read the answer: %w", u, err)
	}
	return nil
}
