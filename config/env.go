package config

import (
	"fmt"
	"reflect"
	"slices"
	"strings"
)

// setting is one key the environment can set: every key of Config's
// struct tags outside the lists (pipelines, destinations). The variable
// names, ApplyEnv and the README's table (checked by a test) follow from it.
type setting struct {
	path  string
	index []int // of the field in Config

	// dest is the index in Destination of the key this S3 default fills
	// when an S3 destination leaves it out; nil for other keys.
	dest []int
	typ  reflect.Type
	opts
}

// field returns a pointer to the setting's field in c.
func (s setting) field(c *Config) any {
	return reflect.ValueOf(c).Elem().FieldByIndex(s.index).Addr().Interface()
}

var settings = envSettings(reflect.TypeFor[Config](), "", nil)

func envSettings(t reflect.Type, prefix string, index []int) []setting {
	var out []setting
	for _, k := range keysOf(t) {
		f := t.Field(k.index)
		path, idx := prefix+k.name, append(slices.Clone(index), k.index)
		switch {
		case f.Type.Kind() == reflect.Struct:
			out = append(out, envSettings(f.Type, path+".", idx)...)
		case isLeaf(f.Type):
			s := setting{path: path, index: idx, typ: f.Type, opts: k.opts}
			if sub, ok := strings.CutPrefix(path, "s3."); ok {
				s.dest, _ = fieldIndex(reflect.TypeFor[Destination](), sub)
			}
			out = append(out, s)
		}
	}
	return out
}

// Setting describes a key the environment can set, for documentation.
type Setting struct {
	Path   string // "nats.url"
	Env    string // "DISTRIBUTOR_NATS_URL"
	Type   string // string, boolean, integer, duration or durations
	Secret bool   // never printed
}

// Settings lists every key the environment can set, in table order.
// Pipelines and destinations (lists) are set only in the file.
func Settings() []Setting {
	out := make([]Setting, len(settings))
	for i, s := range settings {
		out[i] = Setting{Path: s.path, Env: EnvVar(s.path), Type: typeName(s.typ), Secret: s.secret}
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
		p := reflect.ValueOf(c).Elem().FieldByIndex(s.index)
		old := p.Interface()

		// Secrets are strings, which always parse: no error prints one.
		if err := setText(p, v, s.opts); err != nil {
			return &Error{Msg: fmt.Sprintf("%s: %v", env, err)}
		}
		if s.dest != nil {
			for i := range c.Destinations {
				d := &c.Destinations[i]
				if dv := reflect.ValueOf(d).Elem().FieldByIndex(s.dest); d.Backend == BackendS3 && reflect.DeepEqual(dv.Interface(), old) {
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
