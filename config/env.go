package config

import (
	"fmt"
	"reflect"
	"slices"
	"strconv"
	"strings"
)

// setting is one key the environment can set. This table is the one place
// that lists them: the variable names, ApplyEnv and the README's table
// (checked by a test) all follow from it.
type setting struct {
	path  string
	field func(*Config) any // *string, *bool, *int, *Duration or *[]Duration
	// dest is the field of an S3 destination that this S3 default fills
	// when the destination leaves it out; nil for other keys.
	dest func(*Destination) any
	// positive: the value must be above zero (durations) or at least 1.
	positive bool
	secret   bool
}

var settings = []setting{
	{path: "nats.url", field: func(c *Config) any { return &c.NATS.URL }},
	{path: "nats.listen", field: func(c *Config) any { return &c.NATS.Listen }},
	{path: "nats.store_dir", field: func(c *Config) any { return &c.NATS.StoreDir }},
	{path: "nats.subject_prefix", field: func(c *Config) any { return &c.NATS.SubjectPrefix }},
	{path: "nats.creds", field: func(c *Config) any { return &c.NATS.CredsFile }},
	{path: "nats.nkey_seed", field: func(c *Config) any { return &c.NATS.NKeySeedFile }},
	{path: "nats.token", field: func(c *Config) any { return &c.NATS.Token }, secret: true},
	{path: "nats.user", field: func(c *Config) any { return &c.NATS.User }},
	{path: "nats.password", field: func(c *Config) any { return &c.NATS.Password }, secret: true},
	{path: "nats.tls.ca", field: func(c *Config) any { return &c.NATS.TLS.CA }},
	{path: "nats.tls.cert", field: func(c *Config) any { return &c.NATS.TLS.Cert }},
	{path: "nats.tls.key", field: func(c *Config) any { return &c.NATS.TLS.Key }},
	{path: "nats.server_tls.cert", field: func(c *Config) any { return &c.NATS.ServerTLS.Cert }},
	{path: "nats.server_tls.key", field: func(c *Config) any { return &c.NATS.ServerTLS.Key }},
	{path: "nats.server_tls.client_ca", field: func(c *Config) any { return &c.NATS.ServerTLS.ClientCA }},
	{path: "nats.bundle_max_age", field: func(c *Config) any { return &c.NATS.BundleMaxAge }},
	{path: "nats.event_max_age", field: func(c *Config) any { return &c.NATS.EventMaxAge }},
	{path: "nats.replicas", field: func(c *Config) any { return &c.NATS.Replicas }, positive: true},
	{path: "nats.max_deliveries", field: func(c *Config) any { return &c.NATS.MaxDeliveries }, positive: true},
	{path: "nats.redelivery_backoff", field: func(c *Config) any { return &c.NATS.RedeliveryBackoff }, positive: true},
	{path: "http.listen", field: func(c *Config) any { return &c.HTTP.Listen }},
	{path: "s3.region", field: func(c *Config) any { return &c.S3.Region }, dest: func(d *Destination) any { return &d.Region }},
	{path: "s3.endpoint", field: func(c *Config) any { return &c.S3.Endpoint }, dest: func(d *Destination) any { return &d.Endpoint }},
	{path: "s3.path_style", field: func(c *Config) any { return &c.S3.PathStyle }, dest: func(d *Destination) any { return &d.PathStyle }},
	{path: "s3.timeouts.connect", field: func(c *Config) any { return &c.S3.Timeouts.Connect }, dest: func(d *Destination) any { return &d.Timeouts.Connect }, positive: true},
	{path: "s3.timeouts.first_byte", field: func(c *Config) any { return &c.S3.Timeouts.FirstByte }, dest: func(d *Destination) any { return &d.Timeouts.FirstByte }, positive: true},
	{path: "s3.timeouts.idle", field: func(c *Config) any { return &c.S3.Timeouts.Idle }, dest: func(d *Destination) any { return &d.Timeouts.Idle }, positive: true},
	{path: "s3.timeouts.attempts", field: func(c *Config) any { return &c.S3.Timeouts.Attempts }, dest: func(d *Destination) any { return &d.Timeouts.Attempts }, positive: true},
}

// Setting describes a key the environment can set, for documentation.
type Setting struct {
	Path   string // "nats.url"
	Env    string // "DISTRIBUTOR_NATS_URL"
	Type   string // string, boolean, integer, duration or durations (comma-separated)
	Secret bool   // never printed
}

// Settings lists every key the environment can set, in table order.
// Pipelines and destinations (lists) are set only in the file.
func Settings() []Setting {
	out := make([]Setting, len(settings))
	var c Config
	for i, s := range settings {
		typ := "string"
		switch s.field(&c).(type) {
		case *bool:
			typ = "boolean"
		case *int:
			typ = "integer"
		case *Duration:
			typ = "duration"
		case *[]Duration:
			typ = "durations"
		}
		out[i] = Setting{Path: s.path, Env: EnvVar(s.path), Type: typ, Secret: s.secret}
	}
	return out
}

// EnvVar is the variable that sets a key: "nats.url" → DISTRIBUTOR_NATS_URL.
func EnvVar(path string) string {
	return "DISTRIBUTOR_" + strings.ToUpper(strings.ReplaceAll(path, ".", "_"))
}

// ApplyEnv overrides file values with the DISTRIBUTOR_* variables that lookup
// finds set and non-empty (flags, applied later by the caller, override
// both). An S3 default replaces the value of every S3 destination that used
// the old default (left the key out). Relative file names are relative to
// the working folder.
func (c *Config) ApplyEnv(lookup func(string) (string, bool)) error {
	// Work on a copy: a bad variable leaves c as it was.
	n := *c
	n.Destinations = slices.Clone(c.Destinations)
	if err := n.applyEnv(lookup); err != nil {
		return err
	}
	*c = n
	return nil
}

func (c *Config) applyEnv(lookup func(string) (string, bool)) error {
	var applied []string
	for _, s := range settings {
		env := EnvVar(s.path)
		v, ok := lookup(env)
		if !ok || v == "" {
			continue
		}
		p := reflect.ValueOf(s.field(c)).Elem()
		old := p.Interface()
		if err := s.set(c, v); err != nil {
			return &Error{Msg: fmt.Sprintf("%s: %v", env, err)}
		}
		if s.dest != nil {
			for i := range c.Destinations {
				d := &c.Destinations[i]
				if dv := reflect.ValueOf(s.dest(d)).Elem(); d.Backend == BackendS3 && dv.Interface() == old {
					dv.Set(p)
				}
			}
		}
		applied = append(applied, s.path)
	}
	if len(applied) == 0 {
		return nil
	}
	// The file was valid: a problem now comes from a variable.
	errs := c.validate()
	if len(errs) == 0 {
		return nil
	}
	msg := errs[0].msg
	for _, path := range applied {
		if rest, ok := strings.CutPrefix(msg, path+" "); ok {
			return &Error{Msg: EnvVar(path) + " " + rest}
		}
	}
	envs := make([]string, len(applied))
	for i, path := range applied {
		envs[i] = EnvVar(path)
	}
	return &Error{Msg: msg + " (after applying " + strings.Join(envs, ", ") + ")"}
}

// set parses v into the setting's field; secrets never appear in errors
// (they are strings, which always parse).
func (s setting) set(c *Config, v string) error {
	switch p := s.field(c).(type) {
	case *string:
		*p = v
	case *bool:
		b, err := strconv.ParseBool(v)
		if err != nil {
			return fmt.Errorf("%q: use true or false", v)
		}
		*p = b
	case *int:
		n, err := strconv.Atoi(v)
		if err != nil {
			return fmt.Errorf("%q: use a whole number", v)
		}
		if s.positive && n < 1 {
			return fmt.Errorf("%q: must be at least 1", v)
		}
		*p = n
	case *Duration:
		d, err := ParseDuration(v)
		if err != nil {
			return err
		}
		if s.positive && d <= 0 {
			return fmt.Errorf("%q: must be a positive duration such as \"30s\"", v)
		}
		*p = d
	case *[]Duration:
		list, err := parseDurations(v, s.positive)
		if err != nil {
			return err
		}
		*p = list
	default:
		panic(fmt.Sprintf("config: setting %s has an unsupported type %T", s.path, p))
	}
	return nil
}

// parseDurations reads a comma-separated list of durations ("1s, 5s, 1m").
func parseDurations(v string, positive bool) ([]Duration, error) {
	var list []Duration
	for _, item := range strings.Split(v, ",") {
		d, err := ParseDuration(strings.TrimSpace(item))
		if err != nil {
			return nil, fmt.Errorf("%w (a list is comma-separated, e.g. \"1s,5s,1m\")", err)
		}
		if positive && d <= 0 {
			return nil, fmt.Errorf("%q: each delay must be a positive duration such as \"30s\"", item)
		}
		list = append(list, d)
	}
	return list, nil
}
