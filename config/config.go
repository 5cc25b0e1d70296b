// Package config loads distributor's YAML configuration: NATS connection and
// embedded-server settings, S3 defaults, pipelines and destinations.
//
// Decoding is strict: unknown keys, legacy policy keys and wrong types are
// errors that name the file and line. Only the first problem in file order is
// reported, as one line.
package config

import (
	"errors"
	"fmt"
	"net"
	"os"
	"strings"
	"time"

	"github.com/distributor/distributor/planner"
)

// ErrInvalid is wrapped by every error about a configuration's content or a
// configuration file that cannot be read.
var ErrInvalid = errors.New("invalid configuration")

// Defaults applied by Parse when a key is left out.
const (
	DefaultListen        = "127.0.0.1:4222"
	DefaultHTTPListen    = "127.0.0.1:9090"
	DefaultStoreDir      = ".distributor/nats"
	DefaultSubjectPrefix = "distributor"
	DefaultBundleMaxAge  = Duration(7 * day)
	DefaultEventMaxAge   = Duration(30 * day)
	DefaultReplicas      = 1
	DefaultMaxDeliveries = 5
	MaxReplicas          = 5  // the most NATS allows
	DefaultLayoutPrefix  = "" // outputs keep their bundle paths
	DefaultInclude       = "**"
	DefaultMarkdownMatch = "**/*.md"
)

// DefaultRedeliveryBackoff is nats.redelivery_backoff when left out: the
// delay before the 2nd, 3rd, ... delivery of a bundle-ready event whose
// publication failed transiently; the last entry repeats.
func DefaultRedeliveryBackoff() []Duration {
	return []Duration{Duration(time.Second), Duration(5 * time.Second), Duration(15 * time.Second), Duration(30 * time.Second), Duration(time.Minute)}
}

// Backends a destination may use.
const (
	BackendLocal = "local"
	BackendS3    = "s3"
)

// MarkdownToHTML is the only known transform name (the transform package's
// transform.MarkdownToHTML; kept here so config does not depend on it).
const MarkdownToHTML = "markdown_to_html"

// Config is a whole configuration file.
type Config struct {
	NATS NATS
	// HTTP is serve's health and metrics listener.
	HTTP HTTP
	// S3 holds defaults for every S3 access: bundle locations, and S3
	// destinations that do not set their own region, endpoint or path style.
	S3           S3Defaults
	Pipelines    []Pipeline
	Destinations []Destination
	// File is the path the configuration was loaded from ("" when parsed
	// from bytes without a name).
	File string
}

// NATS configures the connection, or the embedded server when URL is empty.
type NATS struct {
	// URL of the servers (nats.go form, may be comma-separated). Empty:
	// `serve` embeds a JetStream server on Listen; other commands connect
	// to it (see ConnectURL).
	URL           string
	Listen        string
	StoreDir      string
	SubjectPrefix string
	CredsFile     string
	NKeySeedFile  string
	Token         string
	User          string
	Password      string
	TLS           TLS
	// ServerTLS is the embedded server's certificate (no nats.url): with
	// it the server accepts only TLS clients.
	ServerTLS ServerTLS
	// BundleMaxAge and EventMaxAge bound the bundle and event streams; 0
	// means no age limit.
	BundleMaxAge Duration
	EventMaxAge  Duration
	// Replicas is how many servers of a NATS cluster keep each stream, the
	// durable consumer and the lease bucket (1 to 5; default 1).
	Replicas int
	// MaxDeliveries bounds the deliveries of one bundle-ready event: a
	// transient failure on the last one is reported failed/max_deliveries.
	MaxDeliveries int
	// RedeliveryBackoff is the delay before each redelivery after a
	// transient failure (entry n-1 after delivery n); the last repeats.
	RedeliveryBackoff []Duration
}

// HTTPOff as HTTP.Listen disables serve's HTTP listener.
const HTTPOff = "off"

// HTTP configures serve's /healthz, /readyz and /metrics listener.
type HTTP struct {
	// Listen is host:port (port 0 picks a free one) or HTTPOff.
	Listen string
}

// TLS names PEM files for the NATS connection.
type TLS struct {
	CA, Cert, Key string
}

// ServerTLS names PEM files for the embedded server's listener.
type ServerTLS struct {
	Cert, Key string
	// ClientCA, when set, makes the server require a client certificate
	// signed by it (mutual TLS).
	ClientCA string
}

// S3Defaults are the S3 settings shared by bundle locations and destinations.
type S3Defaults struct {
	Region    string
	Endpoint  string
	PathStyle bool
	Timeouts  S3Timeouts
}

// S3Timeouts bound each S3 request (the `timeouts:` block); zero fields take
// the built-in defaults. A destination's unset fields take Config.S3's.
type S3Timeouts struct {
	Connect   Duration // TCP connect, and again the TLS handshake
	FirstByte Duration // from the request sent to the first response byte
	Idle      Duration // a request or response body that makes no progress
	// Attempts is how often a request that failed transiently (a timeout
	// included) is tried, with back-off, before the error is reported.
	Attempts int
}

// Pipeline is a producer's id and the destinations it publishes to.
type Pipeline struct {
	ID           string
	Destinations []string
}

// Destination is one configured target.
type Destination struct {
	ID      string
	Backend string // BackendLocal or BackendS3
	// Path is, for local, the root folder (absolute and clean after Parse)
	// and, for s3, the key prefix inside Bucket ("" = bucket root, otherwise
	// ending in "/").
	Path string
	// S3 only; Region, Endpoint, PathStyle and Timeouts default to Config.S3.
	Bucket    string
	Region    string
	Endpoint  string
	PathStyle bool
	Timeouts  S3Timeouts
	Workflow  planner.Workflow
	Layout    Layout
	Publish   Publish
	// Transforms are tried in order; the first whose Match fits a file wins.
	Transforms []Transform
	Links      Links
	Retention  Retention
	// MaxDeletes > 0 aborts any run that would delete more outputs; 0 = no limit.
	MaxDeletes int
}

// Layout maps bundle paths to output paths.
type Layout struct {
	// Prefix is a template with {source_id}, {source_name} and {pipeline_id};
	// see Destination.Prefix.
	Prefix string
}

// Publish selects what is published.
type Publish struct {
	Sources bool     // copy the selected bundle files
	HTML    bool     // run the transforms
	Include []string // doublestar globs over bundle paths
	Exclude []string
}

// Transform is one configured transform.
type Transform struct {
	Name     string // MarkdownToHTML
	Match    string // doublestar glob over bundle paths
	Index    string // bundle path rendered to index.html in its folder; "" = none
	Template string // optional html/template file; "" = built-in page
}

// Links configures output URLs.
type Links struct {
	// BaseURL is an absolute http(s) URL ending in "/"; "" = no URLs.
	BaseURL string
	// Pretty turns ".../index.html" into ".../".
	Pretty bool
}

// Retention configures prune.
type Retention struct {
	// MaxAge is prune's default cutoff; 0 = prune needs --older-than.
	MaxAge Duration
}

// Error is a configuration problem, located in the file when known.
type Error struct {
	File   string // "" when unknown
	Line   int    // 0 when unknown (e.g. Validate on a Config built in code)
	Column int
	Msg    string
	Err    error // underlying cause, if any
}

func (e *Error) Error() string {
	switch {
	case e.Line > 0 && e.File != "":
		return fmt.Sprintf("%s:%d: %s", e.File, e.Line, e.Msg)
	case e.Line > 0:
		return fmt.Sprintf("line %d: %s", e.Line, e.Msg)
	case e.File != "":
		return e.File + ": " + e.Msg
	}
	return e.Msg
}

// Unwrap makes every Error match ErrInvalid, and its cause when there is one.
func (e *Error) Unwrap() []error {
	if e.Err != nil {
		return []error{ErrInvalid, e.Err}
	}
	return []error{ErrInvalid}
}

// Load reads the file at path, parses it and applies the environment.
func Load(path string) (*Config, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, &Error{Msg: "cannot read configuration: " + err.Error(), Err: err}
	}
	c, err := Parse(data, path)
	if err != nil {
		return nil, err
	}
	if err := c.ApplyEnv(os.LookupEnv); err != nil {
		return nil, err
	}
	return c, nil
}

// Environment variables some code names; every key's variable is in
// Settings.
const (
	EnvNATSURL           = "DISTRIBUTOR_NATS_URL"
	EnvNATSSubjectPrefix = "DISTRIBUTOR_NATS_SUBJECT_PREFIX"
	EnvNATSCreds         = "DISTRIBUTOR_NATS_CREDS"
	EnvNATSToken         = "DISTRIBUTOR_NATS_TOKEN"
	EnvNATSPassword      = "DISTRIBUTOR_NATS_PASSWORD"
	EnvS3Endpoint        = "DISTRIBUTOR_S3_ENDPOINT"
	EnvS3Region          = "DISTRIBUTOR_S3_REGION"
)

// Validate checks a configuration (as Parse leaves it: defaults applied) and
// returns the first problem, or nil.
func (c *Config) Validate() error {
	if errs := c.validate(); len(errs) > 0 {
		return &Error{File: c.File, Msg: errs[0].msg}
	}
	return nil
}

// Pipeline returns the pipeline with this id.
func (c *Config) Pipeline(id string) (Pipeline, bool) {
	for _, p := range c.Pipelines {
		if p.ID == id {
			return p, true
		}
	}
	return Pipeline{}, false
}

// KnownPipelines names the configured pipelines for a message about an
// unknown one: "known pipelines: a, b".
func (c *Config) KnownPipelines() string {
	if len(c.Pipelines) == 0 {
		return "the configuration has no pipelines: add it under pipelines"
	}
	ids := make([]string, len(c.Pipelines))
	for i, p := range c.Pipelines {
		ids[i] = p.ID
	}
	return "known pipelines: " + strings.Join(ids, ", ")
}

// Destination returns the destination with this id.
func (c *Config) Destination(id string) (Destination, bool) {
	for _, d := range c.Destinations {
		if d.ID == id {
			return d, true
		}
	}
	return Destination{}, false
}

// ConnectURL is where clients connect: URL, or the embedded server's Listen
// address when URL is empty.
func (n NATS) ConnectURL() string {
	if n.URL != "" {
		return n.URL
	}
	listen := n.Listen
	if listen == "" {
		listen = DefaultListen
	}
	host, port, err := net.SplitHostPort(listen)
	if err != nil {
		return "nats://" + listen
	}
	if host == "" || host == "0.0.0.0" || host == "::" {
		host = "127.0.0.1"
	}
	return "nats://" + net.JoinHostPort(host, port)
}

// label names an item in messages: "destinations[0] (latest-html)".
func label(list string, i int, id string) string {
	if strings.TrimSpace(id) == "" {
		return fmt.Sprintf("%s[%d]", list, i)
	}
	return fmt.Sprintf("%s[%d] (%s)", list, i, id)
}
