// Package natsserver runs the embedded NATS JetStream server that `serve`
// starts when no external nats.url is configured. Tests reuse it through
// testenv.
package natsserver

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nkeys"
	"github.com/rs/zerolog"
)

// readyTimeout bounds how long Start waits for the server to accept clients.
const readyTimeout = 5 * time.Second

// Options configures the embedded server.
type Options struct {
	// Listen is the client address, e.g. "127.0.0.1:4222"; port 0 picks a
	// free port. Empty means no TCP listener: only in-process connections
	// made with Connect.
	Listen string

	// StoreDir is where JetStream keeps streams and key-value buckets. Required.
	StoreDir string

	// Logger receives the server's log lines. Nil silences the server.
	Logger *zerolog.Logger

	// Users, when set, are the only clients the server accepts, each with
	// its permissions (tests check the documented permission sets with it).
	Users []*server.User

	// Token, User/Password or NKey (a public user key, "U…") is the one
	// credential every client must present; at most one, and not with
	// Users. None set: the server accepts anyone.
	Token          string
	User, Password string
	NKey           string

	// TLS, when Cert is set, makes the listener accept only TLS clients.
	TLS TLS

	// MaxPayload bounds a message's size (0: the server's default, 1 MiB).
	MaxPayload int32
}

// TLS names the server's PEM files.
type TLS struct {
	Cert, Key string

	// ClientCA, when set, requires a client certificate signed by it.
	ClientCA string
}

// Server is a running embedded NATS server with JetStream enabled.
type Server struct {
	ns     *server.Server
	inProc bool
}

// Start starts the server and waits until it accepts clients (at most 5 s).
// ctx bounds the start only; stop the server with Shutdown.
func Start(ctx context.Context, opts Options) (*Server, error) {
	if opts.StoreDir == "" {
		return nil, errors.New("natsserver: store directory is empty: set nats.store_dir")
	}
	sopts := &server.Options{
		ServerName: "distributor",
		JetStream:  true,
		StoreDir:   opts.StoreDir,
		// Without NoSigs the server catches SIGINT/SIGTERM and calls
		// os.Exit, skipping the program's own drain.
		NoSigs:     true,
		NoLog:      opts.Logger == nil,
		Users:      opts.Users,
		MaxPayload: opts.MaxPayload,
	}
	if err := setAuth(sopts, opts); err != nil {
		return nil, err
	}
	if opts.Listen == "" {
		sopts.DontListen = true
	} else {
		host, port, err := splitListen(opts.Listen)
		if err != nil {
			return nil, err
		}
		sopts.Host, sopts.Port = host, port
		if port != server.RANDOM_PORT {
			// The server only reports a bind failure by timing out; probe
			// first so the user gets an immediate, precise error.
			if err := probeListen(opts.Listen); err != nil {
				return nil, err
			}
		}
	}

	ns, err := server.NewServer(sopts)
	if err != nil {
		return nil, fmt.Errorf("natsserver: configure embedded server: %w", err)
	}
	if opts.Logger != nil {
		l := zlog{opts.Logger}
		ns.SetLoggerV2(l, opts.Logger.GetLevel() <= zerolog.DebugLevel, opts.Logger.GetLevel() <= zerolog.TraceLevel, false)
	}
	go ns.Start()

	ready := make(chan bool, 1)
	go func() { ready <- ns.ReadyForConnections(readyTimeout) }()
	select {
	case ok := <-ready:
		if !ok {
			ns.Shutdown()
			ns.WaitForShutdown()
			if opts.Listen != "" {
				if err := probeListen(opts.Listen); err != nil {
					return nil, err
				}
			}
			return nil, fmt.Errorf("natsserver: embedded server not ready after %s (store %s)", readyTimeout, opts.StoreDir)
		}
	case <-ctx.Done():
		ns.Shutdown()
		ns.WaitForShutdown()
		return nil, fmt.Errorf("natsserver: start interrupted: %w", ctx.Err())
	}
	if !ns.JetStreamEnabled() {
		ns.Shutdown()
		ns.WaitForShutdown()
		return nil, fmt.Errorf("natsserver: JetStream did not start (store %s): check that the directory is writable", opts.StoreDir)
	}
	return &Server{ns: ns, inProc: opts.Listen == ""}, nil
}

// setAuth configures the credential and TLS that opts ask for.
func setAuth(sopts *server.Options, opts Options) error {
	set := 0
	for _, on := range []bool{len(opts.Users) > 0, opts.Token != "", opts.User != "", opts.NKey != ""} {
		if on {
			set++
		}
	}
	if set > 1 {
		return errors.New("natsserver: set only one of users, token, user/password or nkey")
	}
	switch {
	case opts.Token != "":
		sopts.Authorization = opts.Token
	case opts.User != "":
		sopts.Users = []*server.User{{Username: opts.User, Password: opts.Password}}
	case opts.NKey != "":
		if !nkeys.IsValidPublicUserKey(opts.NKey) {
			return errors.New("natsserver: nkey is not a public user key (it starts with U)")
		}
		sopts.Nkeys = []*server.NkeyUser{{Nkey: opts.NKey}}
	}
	if opts.TLS.Cert == "" {
		if opts.TLS.Key != "" || opts.TLS.ClientCA != "" {
			return errors.New("natsserver: TLS needs a certificate: set nats.server_tls.cert and key")
		}
		return nil
	}
	tc, err := server.GenTLSConfig(&server.TLSConfigOpts{
		CertFile: opts.TLS.Cert,
		KeyFile:  opts.TLS.Key,
		CaFile:   opts.TLS.ClientCA,
		Verify:   opts.TLS.ClientCA != "",
	})
	if err != nil {
		return fmt.Errorf("natsserver: nats.server_tls: %w", err)
	}
	sopts.TLSConfig, sopts.TLS, sopts.TLSVerify = tc, true, opts.TLS.ClientCA != ""

	// The default half second fails handshakes on a loaded machine.
	sopts.TLSTimeout = 5
	return nil
}

// ClientURL is the URL other processes connect to ("nats://127.0.0.1:4222",
// "tls://…" with TLS), or "" when the server has no TCP listener. A server
// listening on every interface is reached on 127.0.0.1.
func (s *Server) ClientURL() string {
	if s.inProc {
		return ""
	}
	u := s.ns.ClientURL()
	scheme, hostport, _ := strings.Cut(u, "://")
	if host, port, err := net.SplitHostPort(hostport); err == nil && (host == "0.0.0.0" || host == "::" || host == "") {
		return scheme + "://" + net.JoinHostPort("127.0.0.1", port)
	}
	return u
}

// ID is the server's unique id, sent to clients in the INFO handshake
// (nats.Conn.ConnectedServerId); a new one on every start.
func (s *Server) ID() string { return s.ns.ID() }

// Name is the server name clients see (nats.Conn.ConnectedServerName).
func (s *Server) Name() string { return s.ns.Name() }

// Connect opens a client connection: in-process when the server has no TCP
// listener, over TCP to ClientURL otherwise.
func (s *Server) Connect(opts ...nats.Option) (*nats.Conn, error) {
	if s.inProc {
		opts = append(opts, nats.InProcessServer(s.ns))
		nc, err := nats.Connect("", opts...)
		if err != nil {
			return nil, fmt.Errorf("natsserver: connect in-process: %w", err)
		}
		return nc, nil
	}
	nc, err := nats.Connect(s.ClientURL(), opts...)
	if err != nil {
		return nil, fmt.Errorf("natsserver: connect %s: %w", s.ClientURL(), err)
	}
	return nc, nil
}

// Shutdown stops the server and waits until it has stopped. It is safe to
// call more than once.
func (s *Server) Shutdown() {
	s.ns.Shutdown()
	s.ns.WaitForShutdown()
}

// splitListen parses "host:port"; port 0 means a random free port.
func splitListen(addr string) (string, int, error) {
	host, p, err := net.SplitHostPort(addr)
	if err != nil {
		return "", 0, fmt.Errorf("nats.listen %q is not host:port: %w", addr, err)
	}
	port, err := strconv.Atoi(p)
	if err != nil || port < 0 || port > 65535 {
		return "", 0, fmt.Errorf("nats.listen %q has an invalid port: use a number from 0 to 65535", addr)
	}
	if host == "" {
		host = "0.0.0.0"
	}
	if port == 0 {
		// For nats-server 0 means the default port 4222.
		port = server.RANDOM_PORT
	}
	return host, port, nil
}

// ListenError is a nats.listen address that cannot be bound (in use, not
// allowed): the configuration must name another.
type ListenError struct {
	msg string
	err error
}

func (e *ListenError) Error() string { return e.msg }
func (e *ListenError) Unwrap() error { return e.err }

// probeListen reports a clear error (a *ListenError) when addr cannot be
// bound.
func probeListen(addr string) error {
	l, err := net.Listen("tcp", addr)
	if err != nil {
		if errors.Is(err, syscall.EADDRINUSE) {
			return &ListenError{fmt.Sprintf("nats.listen %s is in use: set nats.listen or nats.url", addr), err}
		}
		return &ListenError{fmt.Sprintf("nats.listen %s cannot be used: %v", addr, err), err}
	}
	return l.Close()
}

// zlog adapts zerolog to the server's logger interface.
type zlog struct{ l *zerolog.Logger }

func (z zlog) Noticef(format string, v ...any) { z.l.Info().Msgf(format, v...) }
func (z zlog) Warnf(format string, v ...any)   { z.l.Warn().Msgf(format, v...) }

// Fatalf must not exit the process: the program decides what a server
// failure means.
func (z zlog) Fatalf(format string, v ...any) { z.l.Error().Msgf(format, v...) }
func (z zlog) Errorf(format string, v ...any) { z.l.Error().Msgf(format, v...) }
func (z zlog) Debugf(format string, v ...any) { z.l.Debug().Msgf(format, v...) }
func (z zlog) Tracef(format string, v ...any) { z.l.Trace().Msgf(format, v...) }
