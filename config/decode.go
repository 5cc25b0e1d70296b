package config

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/distributor/distributor/planner"
)

// legacyKeys are the pre-workflow policy keys; a destination using any of
// them gets its own message instead of "unknown key".
var legacyKeys = map[string]bool{"state": true, "reconciliation": true, "takeover": true, "transfer": true}

// Parse decodes data strictly, applies defaults and validates. file names
// the source in errors and anchors relative paths ("" = the working folder).
func Parse(data []byte, file string) (*Config, error) {
	root, err := parseYAML(data, file)
	if err != nil {
		return nil, err
	}
	c := &Config{File: file}
	d := &decoder{pos: map[string]pos{}}
	if root != nil {
		d.legacyScan(root)
		d.config(root, c)
	}
	if err := c.applyDefaults(d, file); err != nil {
		return nil, err
	}
	if e := d.first(c.validate()); e != nil {
		e.File = file
		return nil, e
	}
	return c, nil
}

var yamlLineRE = regexp.MustCompile(`^yaml: line (\d+): (.*)$`)

// parseYAML returns the single document's root node (nil for an empty file).
func parseYAML(data []byte, file string) (*yaml.Node, error) {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var doc yaml.Node
	if err := dec.Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, nil
		}
		msg := err.Error()
		if m := yamlLineRE.FindStringSubmatch(msg); m != nil {
			line, _ := strconv.Atoi(m[1])
			return nil, &Error{File: file, Line: line, Msg: "invalid YAML: " + m[2], Err: err}
		}
		return nil, &Error{File: file, Msg: "invalid YAML: " + strings.TrimPrefix(msg, "yaml: "), Err: err}
	}
	var next yaml.Node
	if err := dec.Decode(&next); err == nil {
		return nil, &Error{File: file, Line: next.Line, Msg: "a second YAML document (---) follows: put the whole configuration in one document"}
	}
	if doc.Kind == yaml.DocumentNode && len(doc.Content) == 1 {
		return doc.Content[0], nil
	}
	return nil, nil
}

type pos struct{ line, col int }

// fieldErr is a problem with one field, keyed by its structural path
// ("destinations[0].workflow") so Parse can locate it in the file.
type fieldErr struct {
	key string
	msg string
}

type posErr struct {
	pos
	msg string
}

// decoder walks the YAML node tree, recording the position of every field
// it sees (by structural path) and every problem it finds.
type decoder struct {
	pos    map[string]pos
	errs   []posErr
	legacy []posErr
}

func (d *decoder) has(key string) bool { _, ok := d.pos[key]; return ok }

// locate finds the position of key, or of its nearest present parent.
func (d *decoder) locate(key string) pos {
	for key != "" {
		if p, ok := d.pos[key]; ok {
			return p
		}
		i := strings.LastIndexAny(key, ".[")
		if i < 0 {
			break
		}
		key = key[:i]
	}
	return pos{}
}

// first picks the error to report: a legacy key first (its message is the
// helpful one), otherwise the earliest in the file; decode errors win ties.
func (d *decoder) first(verrs []fieldErr) *Error {
	if len(d.legacy) > 0 {
		return &Error{Line: d.legacy[0].line, Column: d.legacy[0].col, Msg: d.legacy[0].msg}
	}
	all := append([]posErr(nil), d.errs...)
	for _, v := range verrs {
		all = append(all, posErr{d.locate(v.key), v.msg})
	}
	if len(all) == 0 {
		return nil
	}
	sort.SliceStable(all, func(i, j int) bool {
		a, b := all[i], all[j]
		if a.line != b.line {
			return a.line < b.line
		}
		return a.col < b.col
	})
	return &Error{Line: all[0].line, Column: all[0].col, Msg: all[0].msg}
}

func (d *decoder) fail(n *yaml.Node, format string, args ...any) {
	d.errs = append(d.errs, posErr{pos{n.Line, n.Column}, fmt.Sprintf(format, args...)})
}

// loc names a field: prefix names the item an error is about
// ("destinations[0] (x): "), name the field within it ("publish.include"),
// key is the structural path used for positions and unknown-key errors.
type loc struct{ prefix, name, key string }

func join(a, b string) string {
	if a == "" {
		return b
	}
	return a + "." + b
}

func (l loc) child(k string) loc { return loc{l.prefix, join(l.name, k), join(l.key, k)} }

func (l loc) index(i int) loc {
	s := "[" + strconv.Itoa(i) + "]"
	return loc{l.prefix, l.name + s, l.key + s}
}

func (l loc) where() string {
	if l.key == "" {
		return "at the top level"
	}
	return "in " + l.key
}

func resolve(n *yaml.Node) *yaml.Node {
	for n != nil && n.Kind == yaml.AliasNode {
		n = n.Alias
	}
	return n
}

func isNull(n *yaml.Node) bool {
	return n == nil || (n.Kind == yaml.ScalarNode && n.Tag == "!!null")
}

func describe(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	}
	return strconv.Quote(n.Value)
}

func (d *decoder) typeErr(n *yaml.Node, l loc, want string) {
	if l.name == "" && l.prefix == "" {
		d.fail(n, "the configuration must be %s, got %s", want, describe(n))
		return
	}
	d.fail(n, "%s%s must be %s, got %s", l.prefix, l.name, want, describe(n))
}

// mapping walks a mapping's pairs in order; handle returns false for an
// unknown key. A null node is an empty mapping.
func (d *decoder) mapping(n *yaml.Node, l loc, handle func(key string, v *yaml.Node, l loc) bool) {
	n = resolve(n)
	if isNull(n) {
		return
	}
	if n.Kind != yaml.MappingNode {
		d.typeErr(n, l, "a mapping")
		return
	}
	seen := map[string]bool{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := resolve(n.Content[i]), resolve(n.Content[i+1])
		if k.Kind != yaml.ScalarNode {
			d.fail(k, "keys must be plain words, got %s %s", describe(k), l.where())
			continue
		}
		key := k.Value
		if key == "<<" {
			d.fail(k, "merge keys (<<) are not supported %s: write the keys out", l.where())
			continue
		}
		if seen[key] {
			d.fail(k, "duplicate key %q %s: keep one", key, l.where())
			continue
		}
		seen[key] = true
		cl := l.child(key)
		d.pos[cl.key] = pos{k.Line, k.Column} // the key's line reads best for block values
		if !handle(key, v, cl) {
			d.fail(k, "unknown key %q %s", key, l.where())
		}
	}
}

// list walks a sequence; a null node is an empty list.
func (d *decoder) list(n *yaml.Node, l loc, item func(i int, v *yaml.Node, l loc)) {
	n = resolve(n)
	if isNull(n) {
		return
	}
	if n.Kind != yaml.SequenceNode {
		d.typeErr(n, l, "a list")
		return
	}
	for i, v := range n.Content {
		v = resolve(v)
		il := l.index(i)
		d.pos[il.key] = pos{v.Line, v.Column}
		item(i, v, il)
	}
}

func (d *decoder) str(n *yaml.Node, l loc, out *string) {
	switch {
	case isNull(n):
		*out = ""
	case n.Kind == yaml.ScalarNode:
		*out = n.Value
	default:
		d.typeErr(n, l, "a string")
	}
}

func (d *decoder) strs(n *yaml.Node, l loc, out *[]string) {
	var s []string
	d.list(n, l, func(_ int, v *yaml.Node, il loc) {
		var x string
		if isNull(v) || v.Kind != yaml.ScalarNode {
			d.typeErr(v, il, "a string")
			return
		}
		d.str(v, il, &x)
		s = append(s, x)
	})
	*out = s
}

func (d *decoder) boolean(n *yaml.Node, l loc, out *bool) {
	if n.Kind != yaml.ScalarNode || n.Tag != "!!bool" {
		d.typeErr(n, l, "true or false")
		return
	}
	if err := n.Decode(out); err != nil {
		d.typeErr(n, l, "true or false")
	}
}

func (d *decoder) integer(n *yaml.Node, l loc, out *int) {
	if n.Kind != yaml.ScalarNode || n.Tag != "!!int" {
		d.typeErr(n, l, "a whole number")
		return
	}
	if err := n.Decode(out); err != nil {
		d.typeErr(n, l, "a whole number")
	}
}

func (d *decoder) duration(n *yaml.Node, l loc, out *Duration) {
	if isNull(n) || n.Kind != yaml.ScalarNode {
		d.typeErr(n, l, `a duration such as "720h" or "30d"`)
		return
	}
	v, err := ParseDuration(n.Value)
	if err != nil {
		d.fail(n, "%s%s: %v", l.prefix, l.name, err)
		return
	}
	*out = v
}

// durations reads a list of durations. After a decode error the default
// stands in, so that the error is reported alone.
func (d *decoder) durations(n *yaml.Node, l loc, out *[]Duration) {
	before := len(d.errs)
	list := []Duration{}
	d.list(n, l, func(_ int, v *yaml.Node, il loc) {
		var x Duration
		d.duration(v, il, &x)
		list = append(list, x)
	})
	*out = list
	if len(d.errs) > before {
		*out = DefaultRedeliveryBackoff()
	}
}

// legacyScan finds legacy policy keys at any depth inside each destination.
func (d *decoder) legacyScan(root *yaml.Node) {
	root = resolve(root)
	if root.Kind != yaml.MappingNode {
		return
	}
	for i := 0; i+1 < len(root.Content); i += 2 {
		if root.Content[i].Value != "destinations" {
			continue
		}
		seq := resolve(root.Content[i+1])
		if seq.Kind != yaml.SequenceNode {
			return
		}
		for j, item := range seq.Content {
			lbl := label("destinations", j, scalarField(item, "id"))
			d.legacyWalk(resolve(item), lbl, 0)
		}
	}
}

func (d *decoder) legacyWalk(n *yaml.Node, lbl string, depth int) {
	if n == nil || depth > 32 {
		return
	}
	switch n.Kind {
	case yaml.MappingNode:
		for i := 0; i+1 < len(n.Content); i += 2 {
			k := n.Content[i]
			if k.Kind == yaml.ScalarNode && legacyKeys[k.Value] {
				d.legacy = append(d.legacy, posErr{pos{k.Line, k.Column}, fmt.Sprintf(
					`%s: %q is a legacy policy key and is no longer supported; set "workflow: replacement" or "workflow: additive" instead`,
					lbl, k.Value)})
				continue
			}
			d.legacyWalk(resolve(n.Content[i+1]), lbl, depth+1)
		}
	case yaml.SequenceNode:
		for _, v := range n.Content {
			d.legacyWalk(resolve(v), lbl, depth+1)
		}
	}
}

// scalarField returns the scalar value of key in mapping n, or "".
func scalarField(n *yaml.Node, key string) string {
	n = resolve(n)
	if n == nil || n.Kind != yaml.MappingNode {
		return ""
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		if n.Content[i].Value == key {
			if v := resolve(n.Content[i+1]); v.Kind == yaml.ScalarNode && !isNull(v) {
				return v.Value
			}
		}
	}
	return ""
}

func (d *decoder) config(root *yaml.Node, c *Config) {
	d.mapping(root, loc{}, func(key string, v *yaml.Node, l loc) bool {
		switch key {
		case "nats":
			d.nats(v, l, &c.NATS)
		case "http":
			d.mapping(v, l, func(key string, v *yaml.Node, l loc) bool {
				if key != "listen" {
					return false
				}
				d.str(v, l, &c.HTTP.Listen)
				return true
			})
		case "s3":
			d.mapping(v, l, func(key string, v *yaml.Node, l loc) bool {
				switch key {
				case "region":
					d.str(v, l, &c.S3.Region)
				case "endpoint":
					d.str(v, l, &c.S3.Endpoint)
				case "path_style":
					d.boolean(v, l, &c.S3.PathStyle)
				case "timeouts":
					d.s3Timeouts(v, l, &c.S3.Timeouts)
				default:
					return false
				}
				return true
			})
		case "pipelines":
			d.list(v, l, func(i int, v *yaml.Node, l loc) {
				var p Pipeline
				d.pipeline(v, loc{prefix: label("pipelines", i, scalarField(v, "id")) + ": ", key: l.key}, &p)
				c.Pipelines = append(c.Pipelines, p)
			})
		case "destinations":
			d.list(v, l, func(i int, v *yaml.Node, l loc) {
				var dst Destination
				d.destination(v, loc{prefix: label("destinations", i, scalarField(v, "id")) + ": ", key: l.key}, &dst)
				c.Destinations = append(c.Destinations, dst)
			})
		default:
			return false
		}
		return true
	})
}

func (d *decoder) nats(n *yaml.Node, l loc, c *NATS) {
	d.mapping(n, l, func(key string, v *yaml.Node, l loc) bool {
		strField := map[string]*string{
			"url": &c.URL, "listen": &c.Listen, "store_dir": &c.StoreDir, "subject_prefix": &c.SubjectPrefix,
			"creds": &c.CredsFile, "nkey_seed": &c.NKeySeedFile, "token": &c.Token, "user": &c.User, "password": &c.Password,
		}
		if p, ok := strField[key]; ok {
			d.str(v, l, p)
			return true
		}
		switch key {
		case "tls":
			d.mapping(v, l, func(key string, v *yaml.Node, l loc) bool {
				switch key {
				case "ca":
					d.str(v, l, &c.TLS.CA)
				case "cert":
					d.str(v, l, &c.TLS.Cert)
				case "key":
					d.str(v, l, &c.TLS.Key)
				default:
					return false
				}
				return true
			})
		case "server_tls":
			d.mapping(v, l, func(key string, v *yaml.Node, l loc) bool {
				switch key {
				case "cert":
					d.str(v, l, &c.ServerTLS.Cert)
				case "key":
					d.str(v, l, &c.ServerTLS.Key)
				case "client_ca":
					d.str(v, l, &c.ServerTLS.ClientCA)
				default:
					return false
				}
				return true
			})
		case "bundle_max_age":
			d.duration(v, l, &c.BundleMaxAge)
		case "event_max_age":
			d.duration(v, l, &c.EventMaxAge)
		case "replicas":
			// A value of the wrong type reports only its type error.
			c.Replicas = DefaultReplicas
			d.integer(v, l, &c.Replicas)
		case "max_deliveries":
			c.MaxDeliveries = DefaultMaxDeliveries
			d.integer(v, l, &c.MaxDeliveries)
		case "redelivery_backoff":
			d.durations(v, l, &c.RedeliveryBackoff)
		default:
			return false
		}
		return true
	})
}

// s3Timeouts reads a `timeouts:` block; each value must be positive.
func (d *decoder) s3Timeouts(n *yaml.Node, l loc, t *S3Timeouts) {
	d.mapping(n, l, func(key string, v *yaml.Node, l loc) bool {
		var dur *Duration
		before := len(d.errs) // a value of the wrong type is reported once
		switch key {
		case "connect":
			dur = &t.Connect
		case "first_byte":
			dur = &t.FirstByte
		case "idle":
			dur = &t.Idle
		case "attempts":
			d.integer(v, l, &t.Attempts)
			if len(d.errs) == before && t.Attempts < 1 {
				d.fail(v, "%s%s must be at least 1 (1 = no retry)", l.prefix, l.name)
			}
			return true
		default:
			return false
		}
		d.duration(v, l, dur)
		if len(d.errs) == before && *dur <= 0 {
			d.fail(v, "%s%s must be a positive duration such as \"30s\"", l.prefix, l.name)
		}
		return true
	})
}

// or fills t's unset fields from def.
func (t S3Timeouts) or(def S3Timeouts) S3Timeouts {
	if t.Connect == 0 {
		t.Connect = def.Connect
	}
	if t.FirstByte == 0 {
		t.FirstByte = def.FirstByte
	}
	if t.Idle == 0 {
		t.Idle = def.Idle
	}
	if t.Attempts == 0 {
		t.Attempts = def.Attempts
	}
	return t
}

func (d *decoder) pipeline(n *yaml.Node, l loc, p *Pipeline) {
	d.mapping(n, l, func(key string, v *yaml.Node, l loc) bool {
		switch key {
		case "id":
			d.str(v, l, &p.ID)
		case "destinations":
			d.strs(v, l, &p.Destinations)
		default:
			return false
		}
		return true
	})
}

func (d *decoder) destination(n *yaml.Node, l loc, dst *Destination) {
	d.mapping(n, l, func(key string, v *yaml.Node, l loc) bool {
		if legacyKeys[key] {
			return true // reported by legacyScan
		}
		switch key {
		case "id":
			d.str(v, l, &dst.ID)
		case "backend":
			d.str(v, l, &dst.Backend)
		case "path":
			d.str(v, l, &dst.Path)
		case "bucket":
			d.str(v, l, &dst.Bucket)
		case "region":
			d.str(v, l, &dst.Region)
		case "endpoint":
			d.str(v, l, &dst.Endpoint)
		case "path_style":
			d.boolean(v, l, &dst.PathStyle)
		case "timeouts":
			d.s3Timeouts(v, l, &dst.Timeouts)
		case "workflow":
			var s string
			d.str(v, l, &s)
			dst.Workflow = planner.Workflow(s)
		case "layout":
			d.mapping(v, l, func(key string, v *yaml.Node, l loc) bool {
				if key != "prefix" {
					return false
				}
				d.str(v, l, &dst.Layout.Prefix)
				return true
			})
		case "publish":
			d.mapping(v, l, func(key string, v *yaml.Node, l loc) bool {
				switch key {
				case "sources":
					d.boolean(v, l, &dst.Publish.Sources)
				case "html":
					d.boolean(v, l, &dst.Publish.HTML)
				case "include":
					d.strs(v, l, &dst.Publish.Include)
				case "exclude":
					d.strs(v, l, &dst.Publish.Exclude)
				default:
					return false
				}
				return true
			})
		case "transforms":
			d.list(v, l, func(_ int, v *yaml.Node, l loc) {
				var t Transform
				d.mapping(v, l, func(key string, v *yaml.Node, l loc) bool {
					switch key {
					case "name":
						d.str(v, l, &t.Name)
					case "match":
						d.str(v, l, &t.Match)
					case "index":
						d.str(v, l, &t.Index)
					case "template":
						d.str(v, l, &t.Template)
					default:
						return false
					}
					return true
				})
				dst.Transforms = append(dst.Transforms, t)
			})
		case "links":
			d.mapping(v, l, func(key string, v *yaml.Node, l loc) bool {
				switch key {
				case "base_url":
					d.str(v, l, &dst.Links.BaseURL)
				case "pretty":
					d.boolean(v, l, &dst.Links.Pretty)
				default:
					return false
				}
				return true
			})
		case "retention":
			d.mapping(v, l, func(key string, v *yaml.Node, l loc) bool {
				if key != "max_age" {
					return false
				}
				d.duration(v, l, &dst.Retention.MaxAge)
				return true
			})
		case "max_deletes":
			d.integer(v, l, &dst.MaxDeletes)
		default:
			return false
		}
		return true
	})
}

// redeliveryDefaults fills nats.max_deliveries and nats.redelivery_backoff
// when they are left out.
func (n *NATS) redeliveryDefaults(d *decoder) {
	if !d.has("nats.max_deliveries") {
		n.MaxDeliveries = DefaultMaxDeliveries
	}
	if !d.has("nats.redelivery_backoff") {
		n.RedeliveryBackoff = DefaultRedeliveryBackoff()
	}
}

// applyDefaults fills left-out keys and normalises paths: relative paths are
// resolved against the configuration file's folder (the working folder when
// file is ""), local destination roots become clean absolute paths, S3
// prefixes and base URLs end in "/".
func (c *Config) applyDefaults(d *decoder, file string) error {
	base := "."
	if file != "" {
		base = filepath.Dir(file)
	}
	base, err := filepath.Abs(base)
	if err != nil {
		return &Error{File: file, Msg: "cannot resolve the configuration's folder: " + err.Error(), Err: err}
	}
	// Relative file names in a configuration file mean "next to the file";
	// without a file they stay relative to the working folder.
	rel := func(p string) string {
		if p == "" || file == "" || filepath.IsAbs(p) {
			return p
		}
		return filepath.Join(base, p)
	}

	if c.HTTP.Listen == "" {
		c.HTTP.Listen = DefaultHTTPListen
	}
	n := &c.NATS
	if n.Listen == "" {
		n.Listen = DefaultListen
	}
	if n.StoreDir == "" {
		n.StoreDir = DefaultStoreDir
	}
	if n.SubjectPrefix == "" {
		n.SubjectPrefix = DefaultSubjectPrefix
	}
	if !d.has("nats.bundle_max_age") {
		n.BundleMaxAge = DefaultBundleMaxAge
	}
	if !d.has("nats.event_max_age") {
		n.EventMaxAge = DefaultEventMaxAge
	}
	if !d.has("nats.replicas") {
		n.Replicas = DefaultReplicas
	}
	n.redeliveryDefaults(d)
	n.StoreDir = rel(n.StoreDir)
	n.CredsFile = rel(n.CredsFile)
	n.NKeySeedFile = rel(n.NKeySeedFile)
	n.TLS.CA, n.TLS.Cert, n.TLS.Key = rel(n.TLS.CA), rel(n.TLS.Cert), rel(n.TLS.Key)
	n.ServerTLS.Cert, n.ServerTLS.Key, n.ServerTLS.ClientCA = rel(n.ServerTLS.Cert), rel(n.ServerTLS.Key), rel(n.ServerTLS.ClientCA)

	for i := range c.Destinations {
		dst := &c.Destinations[i]
		k := "destinations[" + strconv.Itoa(i) + "]"
		if dst.Workflow == "" {
			dst.Workflow = planner.Additive
		}
		if !d.has(k + ".layout.prefix") {
			dst.Layout.Prefix = DefaultLayoutPrefix
		}
		if !d.has(k + ".publish.sources") {
			dst.Publish.Sources = true
		}
		if !d.has(k + ".publish.html") {
			dst.Publish.HTML = true
		}
		if !d.has(k + ".publish.include") {
			dst.Publish.Include = []string{DefaultInclude}
		}
		if len(dst.Publish.Exclude) == 0 {
			dst.Publish.Exclude = nil
		}
		for j := range dst.Transforms {
			t := &dst.Transforms[j]
			if !d.has(k+".transforms["+strconv.Itoa(j)+"].match") && t.Name == MarkdownToHTML {
				t.Match = DefaultMarkdownMatch
			}
			t.Template = rel(t.Template)
		}
		if dst.Links.BaseURL != "" && !strings.HasSuffix(dst.Links.BaseURL, "/") {
			dst.Links.BaseURL += "/"
		}
		switch dst.Backend {
		case BackendLocal:
			if dst.Path != "" {
				p := dst.Path
				if !filepath.IsAbs(p) {
					p = filepath.Join(base, p)
				}
				dst.Path = filepath.Clean(p)
			}
		case BackendS3:
			if dst.Path != "" && !strings.HasSuffix(dst.Path, "/") {
				dst.Path += "/"
			}
			if dst.Region == "" {
				dst.Region = c.S3.Region
			}
			if dst.Endpoint == "" {
				dst.Endpoint = c.S3.Endpoint
			}
			if !d.has(k + ".path_style") {
				dst.PathStyle = c.S3.PathStyle
			}
			dst.Timeouts = dst.Timeouts.or(c.S3.Timeouts)
		}
	}
	return nil
}
