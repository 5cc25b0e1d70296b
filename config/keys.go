package config

import (
	"fmt"
	"reflect"
	"strconv"
	"strings"
)

// key is one field of a configuration struct, as its tags describe it (see
// Config).
type key struct {
	name  string // the YAML key
	index int    // the field's index in its struct
	opts
}

// opts are a key's options.
type opts struct {
	def      string // default tag, in the environment's form
	hasDef   bool
	positive bool
	file     bool
	secret   bool
	hint     string
}

var durationType = reflect.TypeFor[Duration]()

// keysOf lists the keys of a configuration struct type, in field order.
func keysOf(t reflect.Type) []key {
	var keys []key
	for i := range t.NumField() {
		f := t.Field(i)
		name := f.Tag.Get("yaml")
		if name == "" || name == "-" {
			continue
		}
		k := key{name: name, index: i, opts: opts{hint: f.Tag.Get("hint")}}
		k.def, k.hasDef = f.Tag.Lookup("default")
		for _, o := range strings.Split(f.Tag.Get("cfg"), ",") {
			switch o {
			case "positive":
				k.positive = true
			case "file":
				k.file = true
			case "secret":
				k.secret = true
			case "":
			default:
				panic(fmt.Sprintf("config: field %s.%s has an unknown cfg option %q", t.Name(), f.Name, o))
			}
		}
		keys = append(keys, k)
	}
	return keys
}

// isLeaf: a value the environment's text form can hold (not a mapping or a
// list of mappings).
func isLeaf(t reflect.Type) bool {
	if t.Kind() == reflect.Slice {
		t = t.Elem()
	}
	return t.Kind() != reflect.Struct
}

// typeName names a leaf type for documentation (Setting.Type).
func typeName(t reflect.Type) string {
	switch {
	case t == durationType:
		return "duration"
	case t.Kind() == reflect.Slice:
		return typeName(t.Elem()) + "s" // "durations"
	case t.Kind() == reflect.Bool:
		return "boolean"
	case t.Kind() == reflect.Int:
		return "integer"
	}
	return "string"
}

// fillDefaults sets every field of struct v that has a default, also in
// nested mappings (list items are filled as they are decoded).
func fillDefaults(v reflect.Value) {
	for _, k := range keysOf(v.Type()) {
		f := v.Field(k.index)
		switch {
		case k.hasDef:
			if err := setText(f, k.def, k.opts); err != nil {
				panic(fmt.Sprintf("config: bad default of %s: %v", k.name, err))
			}
		case f.Kind() == reflect.Struct:
			fillDefaults(f)
		}
	}
}

// setText parses s, the environment's form of a value, into the leaf v.
// Lists are comma-separated. Errors name the value, not the key.
func setText(v reflect.Value, s string, o opts) error {
	switch {
	case v.Type() == durationType:
		d, err := ParseDuration(s)
		if err != nil {
			return err
		}
		if o.positive && d <= 0 {
			return fmt.Errorf("%q: must be a positive duration such as \"30s\"", s)
		}
		v.SetInt(int64(d))
	case v.Kind() == reflect.Slice:
		parts := strings.Split(s, ",")
		list := reflect.MakeSlice(v.Type(), len(parts), len(parts))
		for i, p := range parts {
			if err := setText(list.Index(i), strings.TrimSpace(p), o); err != nil {
				return err
			}
		}
		v.Set(list)
	case v.Kind() == reflect.String:
		v.SetString(s)
	case v.Kind() == reflect.Bool:
		b, err := strconv.ParseBool(s)
		if err != nil {
			return fmt.Errorf("%q: use true or false", s)
		}
		v.SetBool(b)
	case v.Kind() == reflect.Int:
		n, err := strconv.Atoi(s)
		if err != nil {
			return fmt.Errorf("%q: use a whole number", s)
		}
		if o.positive && n < 1 {
			return fmt.Errorf("%q: must be at least 1", s)
		}
		v.SetInt(int64(n))
	default:
		panic(fmt.Sprintf("config: unsupported type %s", v.Type()))
	}
	return nil
}

// relFiles applies rel to every file key of struct v, list items included.
func relFiles(v reflect.Value, rel func(string) string) {
	for _, k := range keysOf(v.Type()) {
		f := v.Field(k.index)
		switch {
		case k.file:
			f.SetString(rel(f.String()))
		case f.Kind() == reflect.Struct:
			relFiles(f, rel)
		case f.Kind() == reflect.Slice && f.Type().Elem().Kind() == reflect.Struct:
			for i := range f.Len() {
				relFiles(f.Index(i), rel)
			}
		}
	}
}

// fieldIndex finds the field at a dotted key path below struct type t.
func fieldIndex(t reflect.Type, path string) ([]int, bool) {
	var index []int
	for _, name := range strings.Split(path, ".") {
		if t.Kind() != reflect.Struct {
			return nil, false
		}
		found := false
		for _, k := range keysOf(t) {
			if k.name == name {
				index, t, found = append(index, k.index), t.Field(k.index).Type, true
				break
			}
		}
		if !found {
			return nil, false
		}
	}
	return index, true
}
