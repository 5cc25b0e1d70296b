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
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/distributor/distributor/planner"
)

// ErrInvalid is wrapped by every error about a configuration's content or a
// configuration file that cannot be read.
var ErrInvalid = errors.New("invalid configuration")

// Defaults applied by Parse when a key is left out, for code that needs
// them by name; the fields' default tags are what Parse applies (a test
// checks they agree).
const (
	DefaultListen        = "127.0.0.1:4222"
	DefaultHTTPListen    = "127.0.0.1:9090"
	DefaultStoreDir      = ".distributor/nats"
	DefaultSubjectPrefix = "distributor"
	DefaultBundleMaxAge  = Duration(7 * day)
	DefaultEventMaxAge   = Duration(30 * day)
	DefaultReplicas      = 1
	DefaultMaxDeliveries = 5

	// DefaultPublicationTimeout and DefaultDestinationParallelism are
	// publication_timeout and destination_parallelism.
	DefaultPublicationTimeout     = Duration(10 * time.Minute)
	DefaultDestinationParallelism = 16
	DefaultMaxClockSkew           = Duration(5 * time.Minute)
	MaxReplicas                   = 5  // the most NATS allows
	DefaultLayoutPrefix           = "" // outputs keep their bundle paths
	DefaultInclude                = "**"
	DefaultMarkdownMatch          = "**/*.md"
)

// Backends a destination may use.
const (
	BackendLocal = "local"
	BackendS3    = "s3"
)

// MarkdownToHTML is the only known transform name (the transform package's
// transform.MarkdownToHTML; kept here so config does not depend on it).
const MarkdownToHTML = "markdown_to_html"

// Config is a whole configuration file.
//
// The struct tags are the whole specification of each key, read by the
// decoder, the defaults, the environment (env.go) and the docs test:
//
//	yaml:"name"       the key (a field without one is not configuration)
//	default:"value"   the value when the key is left out (a string also when
//	                  empty), written as its environment variable would be
//	cfg:"positive"    durations > 0 and integers ≥ 1 (each item of a list)
//	cfg:"file"        a file name, relative to the configuration file
//	cfg:"secret"      never printed
//	hint:"text"       explains the range in messages
//
// Every key outside pipelines and destinations can also be set by its
// environment variable (EnvVar). Adding a key is adding a field here, and
// its row in docs/configuration.md (a test checks both agree).
type Config struct {
	NATS NATS `yaml:"nats"`

	// HTTP is serve's health and metrics listener.
	HTTP HTTP `yaml:"http"`

	// PublicationTimeout bounds each publication of a bundle to one
	// destination, waiting for its root's lease included (`apply
	// --timeout` overrides it).
	PublicationTimeout Duration `yaml:"publication_timeout" default:"10m" cfg:"positive"`

	// DestinationParallelism bounds how many destinations of one event
	// (or one apply) publish at once.
	DestinationParallelism int `yaml:"destination_parallelism" default:"16" cfg:"positive"`

	// S3 holds defaults for every S3 access: bundle locations, and S3
	// destinations that leave out the same key (region, endpoint,
	// path_style, timeouts).
	S3 S3Defaults `yaml:"s3"`

	// MaxClockSkew is how far past the time of its announcement (serve:
	// when NATS stored the event; direct mode: this host's clock) a
	// bundle's created time may lie (a producer's clock a little ahead);
	// a later one is
	// refused as invalid (bundle.CheckCreated): newest wins by created, so
	// a bundle from the future would pin its paths.
	MaxClockSkew Duration      `yaml:"max_clock_skew" default:"5m" cfg:"positive"`
	Pipelines    []Pipeline    `yaml:"pipelines"`
	Destinations []Destination `yaml:"destinations"`

	// File is the path the configuration was loaded from ("" when parsed
	// from bytes without a name).
	File string
}

// NATS configures the connection, or the embedded server when URL is empty.
type NATS struct {
	// URL of the servers (nats.go form, may be comma-separated). Empty:
	// `serve` embeds a JetStream server on Listen; other commands connect
	// to it (see ConnectURL).
	URL           string `yaml:"url"`
	Listen        string `yaml:"listen" default:"127.0.0.1:4222"`
	StoreDir      string `yaml:"store_dir" default:".distributor/nats" cfg:"file"`
	SubjectPrefix string `yaml:"subject_prefix" default:"distributor"`
	CredsFile     string `yaml:"creds" cfg:"file"`
	NKeySeedFile  string `yaml:"nkey_seed" cfg:"file"`
	Token         string `yaml:"token" cfg:"secret"`
	User          string `yaml:"user"`
	Password      string `yaml:"password" cfg:"secret"`
	TLS           TLS    `yaml:"tls"`

	// ServerTLS is the embedded server's certificate (no nats.url): with
	// it the server accepts only TLS clients.
	ServerTLS ServerTLS `yaml:"server_tls"`

	// BundleMaxAge and EventMaxAge bound the bundle and event streams; 0
	// means no age limit.
	BundleMaxAge Duration `yaml:"bundle_max_age" default:"7d"`
	EventMaxAge  Duration `yaml:"event_max_age" default:"30d"`

	// Replicas is how many servers of a NATS cluster keep each stream, the
	// durable consumer and the lease bucket (1 to 5; default 1).
	Replicas int `yaml:"replicas" default:"1"`

	// MaxDeliveries is how often a bundle-ready event is delivered before
	// it is given up.
	MaxDeliveries int `yaml:"max_deliveries" default:"5" cfg:"positive"`

	// RedeliveryBackoff are the waits before each redelivery; the last one
	// repeats.
	RedeliveryBackoff []Duration `yaml:"redelivery_backoff" default:"1s,5s,15s,30s,1m" cfg:"positive"`
}

// HTTPOff as HTTP.Listen disables serve's HTTP listener.
const HTTPOff = "off"

// HTTP configures serve's listener: the status page, /healthz, /readyz
// and /metrics.
type HTTP struct {
	// Listen is host:port (port 0 picks a free one) or HTTPOff.
	Listen string `yaml:"listen" default:"127.0.0.1:9090"`
}

// TLS names PEM files for the NATS connection.
type TLS struct {
	CA   string `yaml:"ca" cfg:"file"`
	Cert string `yaml:"cert" cfg:"file"`
	Key  string `yaml:"key" cfg:"file"`
}

// ServerTLS names PEM files for the embedded server's listener.
type ServerTLS struct {
	Cert string `yaml:"cert" cfg:"file"`
	Key  string `yaml:"key" cfg:"file"`

	// ClientCA, when set, makes the server require a client certificate
	// signed by it (mutual TLS).
	ClientCA string `yaml:"client_ca" cfg:"file"`
}

// S3Defaults are the S3 settings shared by bundle locations and destinations.
type S3Defaults struct {
	Region    string     `yaml:"region"`
	Endpoint  string     `yaml:"endpoint"`
	PathStyle bool       `yaml:"path_style"`
	Timeouts  S3Timeouts `yaml:"timeouts"`
}

// S3Timeouts bound each S3 request (the `timeouts:` block); zero fields take
// the built-in defaults. A destination's unset fields take Config.S3's.
type S3Timeouts struct {
	Connect   Duration `yaml:"connect" cfg:"positive"`    // TCP connect, and again the TLS handshake
	FirstByte Duration `yaml:"first_byte" cfg:"positive"` // from the request sent to the first response byte
	Idle      Duration `yaml:"idle" cfg:"positive"`       // a request or response body that makes no progress

	// Attempts is how often a request that failed transiently (a timeout
	// included) is tried, with back-off, before the error is reported.
	Attempts int `yaml:"attempts" cfg:"positive" hint:"1 = no retry"`

	// MinRate fails a transfer that moves fewer bytes per second than this,
	// averaged over each Idle of time spent waiting for it.
	MinRate int `yaml:"min_rate" cfg:"positive" hint:"bytes per second"`
}

// Pipeline is a producer's id, the destinations it publishes to and where
// its bundles may be.
type Pipeline struct {
	ID           string   `yaml:"id"`
	Destinations []string `yaml:"destinations"`

	// BundleLocations are the local folders and s3://bucket/prefix/
	// prefixes its bundles must lie in (AllowsBundle); none: anywhere.
	BundleLocations []string `yaml:"bundle_locations"`
}

// Destination is one configured target.
type Destination struct {
	ID      string `yaml:"id"`
	Backend string `yaml:"backend"` // BackendLocal or BackendS3

	// Path is, for local, the root folder (absolute and clean after Parse)
	// and, for s3, the key prefix inside Bucket ("" = bucket root, otherwise
	// ending in "/").
	Path string `yaml:"path"`

	// S3 only; Region, Endpoint, PathStyle and Timeouts default to Config.S3.
	Bucket    string           `yaml:"bucket"`
	Region    string           `yaml:"region"`
	Endpoint  string           `yaml:"endpoint"`
	PathStyle bool             `yaml:"path_style"`
	Timeouts  S3Timeouts       `yaml:"timeouts"`
	Workflow  planner.Workflow `yaml:"workflow" default:"additive"`
	Layout    Layout           `yaml:"layout"`
	Publish   Publish          `yaml:"publish"`

	// Transforms are tried in order; the first whose Match fits a file wins.
	Transforms []Transform `yaml:"transforms"`
	Links      Links       `yaml:"links"`
	Retention  Retention   `yaml:"retention"`

	// MaxDeletes > 0 aborts any run that would delete more outputs; 0 = no limit.
	MaxDeletes int `yaml:"max_deletes"`

	// PublishLast are doublestar globs over output paths, each a group
	// made visible in the order listed, after the outputs that match none.
	PublishLast []string `yaml:"publish_last"`

	// RetainPrevious keeps the paths a replacement publication drops
	// readable for this long before they are removed; 0 = removed at once.
	RetainPrevious Duration `yaml:"retain_previous"`

	// Notify are the downstream systems told about this destination's
	// results (see NotifyTarget); none: nothing is sent.
	Notify []NotifyTarget `yaml:"notify"`
}

// Layout maps bundle paths to output paths.
type Layout struct {
	// Prefix is a template with {source_id}, {source_name} and {pipeline_id};
	// see Destination.Prefix. "" (the default) keeps the bundle paths.
	Prefix string `yaml:"prefix"`
}

// Publish selects what is published.
type Publish struct {
	Sources bool     `yaml:"sources" default:"true"` // copy the selected bundle files
	HTML    bool     `yaml:"html" default:"true"`    // run the transforms
	Include []string `yaml:"include" default:"**"`   // doublestar globs over bundle paths
	Exclude []string `yaml:"exclude"`
}

// Transform is one configured transform.
type Transform struct {
	Name     string `yaml:"name"`                    // MarkdownToHTML
	Match    string `yaml:"match" default:"**/*.md"` // doublestar glob over bundle paths
	Index    string `yaml:"index"`                   // bundle path rendered to index.html in its folder; "" = none
	Template string `yaml:"template" cfg:"file"`     // optional html/template file; "" = built-in page
}

// Links configures output URLs.
type Links struct {
	// BaseURL is an absolute http(s) URL ending in "/"; "" = no URLs.
	BaseURL string `yaml:"base_url"`

	// Pretty turns ".../index.html" into ".../".
	Pretty bool `yaml:"pretty"`
}

// Retention configures prune.
type Retention struct {
	// MaxAge is prune's default cutoff; 0 = prune needs --older-than.
	MaxAge Duration `yaml:"max_age"`
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
	if errors.Is(err, fs.ErrNotExist) {
		looked := path
		if abs, aerr := filepath.Abs(path); aerr == nil {
			looked = abs
		}
		return nil, &Error{Msg: fmt.Sprintf("no configuration file %s: give its path with --config PATH", looked), Err: err}
	}
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

// ClockSkew is max_clock_skew: the default when c is nil (a command run
// without a configuration) or was not parsed (zero).
func (c *Config) ClockSkew() time.Duration {
	if c == nil || c.MaxClockSkew <= 0 {
		return time.Duration(DefaultMaxClockSkew)
	}
	return time.Duration(c.MaxClockSkew)
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

// KnownDestinations lists the configured destinations for an error line
// about an unknown one.
func (c *Config) KnownDestinations() string {
	if len(c.Destinations) == 0 {
		return "the configuration has no destinations: add it under destinations"
	}
	ids := make([]string, len(c.Destinations))
	for i, d := range c.Destinations {
		ids[i] = d.ID
	}
	return "known destinations: " + strings.Join(ids, ", ")
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
