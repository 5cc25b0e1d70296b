package config

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/distributor/distributor/internal/suggest"
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
	fillDefaults(reflect.ValueOf(c).Elem())
	d := &decoder{pos: map[string]pos{}}
	if root != nil {
		d.config(root, c)
	}
	if err := c.normalise(d, file); err != nil {
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

// what names the value at l in messages.
func (l loc) what() string {
	switch {
	case l.name != "":
		return l.prefix + l.name
	case l.prefix != "":
		return strings.TrimSuffix(l.prefix, ": ")
	}
	return "the configuration"
}

func (d *decoder) typeErr(n *yaml.Node, l loc, want string) {
	d.fail(n, "%s must be %s, got %s", l.what(), want, describe(n))
}

// config decodes the whole file into c.
func (d *decoder) config(root *yaml.Node, c *Config) {
	d.value(root, loc{}, reflect.ValueOf(c).Elem(), opts{})
}

// value decodes n into v by v's type; a value of the wrong type leaves v
// as it was (its default) and reports only the type error.
func (d *decoder) value(n *yaml.Node, l loc, v reflect.Value, o opts) {
	n = resolve(n)
	switch {
	case v.Type() == durationType:
		d.duration(n, l, v, o)
	case v.Kind() == reflect.Struct:
		d.mapping(n, l, v)
	case v.Kind() == reflect.Slice:
		d.list(n, l, v, o)
	case v.Kind() == reflect.String:
		d.str(n, l, v)
	case v.Kind() == reflect.Bool:
		d.boolean(n, l, v)
	case v.Kind() == reflect.Int:
		d.integer(n, l, v, o)
	default:
		panic(fmt.Sprintf("config: unsupported type %s", v.Type()))
	}
}

// mapping decodes a mapping into struct v, key by key in file order. A
// null node is an empty mapping.
func (d *decoder) mapping(n *yaml.Node, l loc, v reflect.Value) {
	if isNull(n) {
		return
	}
	if n.Kind != yaml.MappingNode {
		d.typeErr(n, l, "a mapping")
		return
	}
	keys := keysOf(v.Type())
	seen := map[string]bool{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k := resolve(n.Content[i])
		switch {
		case k.Kind != yaml.ScalarNode:
			d.fail(k, "keys must be plain words, got %s %s", describe(k), l.where())
			continue
		case k.Value == "<<":
			d.fail(k, "merge keys (<<) are not supported %s: write the keys out", l.where())
			continue
		case seen[k.Value]:
			d.fail(k, "duplicate key %q %s: keep one", k.Value, l.where())
			continue
		}
		seen[k.Value] = true
		cl := l.child(k.Value)
		d.pos[cl.key] = pos{k.Line, k.Column} // the key's line reads best for block values
		j := slices.IndexFunc(keys, func(x key) bool { return x.name == k.Value })
		if j < 0 {
			d.unknown(k, l, keys)
			continue
		}
		d.value(n.Content[i+1], cl, v.Field(keys[j].index), keys[j].opts)
	}
}

// unknown reports a key no field has. A legacy policy key anywhere in a
// destination gets its own message, which wins over every other problem.
func (d *decoder) unknown(k *yaml.Node, l loc, keys []key) {
	if legacyKeys[k.Value] && strings.HasPrefix(l.key, "destinations[") {
		d.legacy = append(d.legacy, posErr{pos{k.Line, k.Column}, fmt.Sprintf(
			`%s%q is a legacy policy key and is no longer supported; set "workflow: replacement" or "workflow: additive" instead`,
			l.prefix, k.Value)})
		return
	}
	d.fail(k, "unknown key %q %s%s", k.Value, l.where(), didYouMean(k.Value, keys))
}

// list decodes a sequence into slice v; a null node is an empty list. The
// items of a top-level list name themselves in messages:
// "destinations[0] (latest-html): ".
func (d *decoder) list(n *yaml.Node, l loc, v reflect.Value, o opts) {
	v.SetZero()
	if isNull(n) {
		return
	}
	if n.Kind != yaml.SequenceNode {
		d.typeErr(n, l, "a list")
		return
	}
	for i, item := range n.Content {
		item = resolve(item)
		il := l.index(i)
		d.pos[il.key] = pos{item.Line, item.Column}
		e := reflect.New(v.Type().Elem()).Elem()
		switch {
		case e.Kind() == reflect.Struct:
			fillDefaults(e)
			if l.prefix == "" {
				il = loc{prefix: label(l.key, i, scalarField(item, "id")) + ": ", key: il.key}
			}
		case e.Kind() == reflect.String && isNull(item):
			d.typeErr(item, il, "a string") // a list of strings has no empty items
			continue
		}
		d.value(item, il, e, o)
		v.Set(reflect.Append(v, e))
	}
}

// str decodes a scalar; an empty one leaves the default.
func (d *decoder) str(n *yaml.Node, l loc, v reflect.Value) {
	switch {
	case isNull(n):
	case n.Kind == yaml.ScalarNode:
		if n.Value != "" {
			v.SetString(n.Value)
		}
	default:
		d.typeErr(n, l, "a string")
	}
}

func (d *decoder) boolean(n *yaml.Node, l loc, v reflect.Value) {
	var b bool
	if n.Kind != yaml.ScalarNode || n.Tag != "!!bool" || n.Decode(&b) != nil {
		d.typeErr(n, l, "true or false")
		return
	}
	v.SetBool(b)
}

func (d *decoder) integer(n *yaml.Node, l loc, v reflect.Value, o opts) {
	var x int
	switch {
	case n.Kind != yaml.ScalarNode || n.Tag != "!!int" || n.Decode(&x) != nil:
		d.typeErr(n, l, "a whole number")
	case o.positive && x < 1:
		d.fail(n, "%s must be at least 1%s", l.what(), o.hintText())
	default:
		v.SetInt(int64(x))
	}
}

func (d *decoder) duration(n *yaml.Node, l loc, v reflect.Value, o opts) {
	if isNull(n) || n.Kind != yaml.ScalarNode {
		d.typeErr(n, l, `a duration such as "720h" or "30d"`)
		return
	}
	x, err := ParseDuration(n.Value)
	switch {
	case err != nil:
		d.fail(n, "%s: %v", l.what(), err)
	case o.positive && x <= 0:
		d.fail(n, "%s must be a positive duration such as \"30s\"%s", l.what(), o.hintText())
	default:
		v.SetInt(int64(x))
	}
}

func (o opts) hintText() string {
	if o.hint == "" {
		return ""
	}
	return " (" + o.hint + ")"
}

// didYouMean names the known key closest to an unknown one, when one is close
// enough to be a typo: `: did you mean "workflow"?`.
func didYouMean(unknown string, keys []key) string {
	names := make([]string, len(keys))
	for i, k := range keys {
		names[i] = k.name
	}

	// One edit, and one more per 5 letters.
	best := suggest.Closest(unknown, names, 1+len(unknown)/5)
	if best == "" {
		return ""
	}
	return fmt.Sprintf(": did you mean %q?", best)
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

// normalise resolves relative file names against the configuration file's
// folder (the working folder when file is "": they stay relative), makes
// local destination roots clean absolute paths, ends S3 prefixes and base
// URLs in "/", and fills what an S3 destination left out from the s3 keys.
func (c *Config) normalise(d *decoder, file string) error {
	base := "."
	if file != "" {
		base = filepath.Dir(file)
	}
	base, err := filepath.Abs(base)
	if err != nil {
		return &Error{File: file, Msg: "cannot resolve the configuration's folder: " + err.Error(), Err: err}
	}
	relFiles(reflect.ValueOf(c).Elem(), func(p string) string {
		if p == "" || file == "" || filepath.IsAbs(p) {
			return p
		}
		return filepath.Join(base, p)
	})
	for i := range c.Destinations {
		dst := &c.Destinations[i]
		if dst.Links.BaseURL != "" && !strings.HasSuffix(dst.Links.BaseURL, "/") {
			dst.Links.BaseURL += "/"
		}
		switch dst.Backend {
		case BackendLocal:
			if dst.Path != "" && !filepath.IsAbs(dst.Path) {
				dst.Path = filepath.Join(base, dst.Path)
			}
			if dst.Path != "" {
				dst.Path = filepath.Clean(dst.Path) // Join cleans too
			}
		case BackendS3:
			if dst.Path != "" && !strings.HasSuffix(dst.Path, "/") {
				dst.Path += "/"
			}
			c.inheritS3(d, i)
		}
	}
	return nil
}

// inheritS3 fills the s3 keys destination i left out (or left empty) from
// the top-level s3 section.
func (c *Config) inheritS3(d *decoder, i int) {
	dst := reflect.ValueOf(&c.Destinations[i]).Elem()
	for _, s := range settings {
		if s.dest == nil {
			continue
		}
		f := dst.FieldByIndex(s.dest)
		k := "destinations[" + strconv.Itoa(i) + "]" + strings.TrimPrefix(s.path, "s3")
		if !d.has(k) || f.Kind() == reflect.String && f.String() == "" {
			f.Set(reflect.ValueOf(c).Elem().FieldByIndex(s.index))
		}
	}
}
