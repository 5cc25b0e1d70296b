package config

import (
	"maps"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

const configurationDoc = "../docs/configuration.md"

// decodeNames are the key names of every configuration struct (their yaml
// tags), the names the probe tries under every mapping.
func decodeNames(t *testing.T) []string {
	t.Helper()
	set := map[string]bool{}
	var walk func(reflect.Type)
	walk = func(typ reflect.Type) {
		for typ.Kind() == reflect.Slice {
			typ = typ.Elem()
		}
		if typ.Kind() != reflect.Struct {
			return
		}
		for _, k := range keysOf(typ) {
			set[k.name] = true
			walk(typ.Field(k.index).Type)
		}
	}
	walk(reflect.TypeFor[Config]())
	return slices.Sorted(maps.Keys(set))
}

// nest wraps v in the YAML structure of path ("destinations[].timeouts").
func nest(path string, v any) any {
	if path == "" {
		return v
	}
	parts := strings.Split(path, ".")
	for i := len(parts) - 1; i >= 0; i-- {
		name, list := strings.CutSuffix(parts[i], "[]")
		if list {
			v = []any{v}
		}
		v = map[string]any{name: v}
	}
	return v
}

// decodeErrs runs the decoder (no defaults, no validation) on the YAML of v.
func decodeErrs(t *testing.T, v any) string {
	t.Helper()
	data, err := yaml.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	root, err := parseYAML(data, "")
	if err != nil {
		t.Fatal(err)
	}
	d := &decoder{pos: map[string]pos{}}
	d.config(root, &Config{})
	var msgs []string
	for _, e := range d.errs {
		msgs = append(msgs, e.msg)
	}
	return strings.Join(msgs, "\n")
}

// acceptedKeys asks the decoder which keys it accepts: every name it compares
// with is tried under every mapping it accepts, starting at the top level; a
// key is a mapping (or a list of mappings) when a probe key inside it is
// reported as unknown. Leaves are returned with the mappings apart.
func acceptedKeys(t *testing.T) (leaves, mappings []string) {
	t.Helper()
	names := decodeNames(t)
	const probe = "zz_probe"
	unknown := func(msgs, key string) bool { return strings.Contains(msgs, "unknown key "+strconv.Quote(key)) }
	queue := []string{""}
	for len(queue) > 0 {
		parent := queue[0]
		queue = queue[1:]
		for _, name := range names {
			if unknown(decodeErrs(t, nest(parent, map[string]any{name: "x"})), name) {
				continue
			}
			key := strings.TrimPrefix(parent+"."+name, ".")
			switch {
			case unknown(decodeErrs(t, nest(key, map[string]any{probe: 1})), probe):
				mappings = append(mappings, key)
				queue = append(queue, key)
			case unknown(decodeErrs(t, nest(key+"[]", map[string]any{probe: 1})), probe):
				mappings = append(mappings, key)
				queue = append(queue, key+"[]")
			default:
				leaves = append(leaves, key)
			}
		}
	}
	slices.Sort(leaves)
	return leaves, mappings
}

// documentedKeys are the first cells of the key tables of configuration.md.
func documentedKeys(t *testing.T) []string {
	t.Helper()
	data, err := os.ReadFile(configurationDoc)
	if err != nil {
		t.Fatal(err)
	}
	var keys []string
	for _, m := range regexp.MustCompile("(?m)^\\| `([a-z0-9_.\\[\\]]+)` \\|").FindAllStringSubmatch(string(data), -1) {
		keys = append(keys, m[1])
	}
	slices.Sort(keys)
	return keys
}

// TestConfigurationDocNamesEveryKey: every key the decoder accepts has a row
// in docs/configuration.md, and every row names a key the decoder accepts.
func TestConfigurationDocNamesEveryKey(t *testing.T) {
	leaves, mappings := acceptedKeys(t)
	if len(leaves) < 40 || !slices.Contains(leaves, "nats.server_tls.client_ca") || !slices.Contains(leaves, "destinations[].timeouts.first_byte") {
		t.Fatalf("the decoder probe found too little (%d keys: %v): the probe is broken", len(leaves), leaves)
	}
	documented := documentedKeys(t)
	for _, k := range leaves {
		if !slices.Contains(documented, k) {
			t.Errorf("the decoder accepts %s, docs/configuration.md has no row for it", k)
		}
	}
	for _, k := range documented {
		if !slices.Contains(leaves, k) && !slices.Contains(mappings, k) {
			t.Errorf("docs/configuration.md documents %s, the decoder does not accept it", k)
		}
	}
}

// TestConfigurationDocNamesEveryVariable: every key row of
// docs/configuration.md names the variable that sets it (or none), and no
// variable is mentioned that the environment table does not read.
func TestConfigurationDocNamesEveryVariable(t *testing.T) {
	data, err := os.ReadFile(configurationDoc)
	if err != nil {
		t.Fatal(err)
	}
	env := map[string]string{} // variable -> key path
	for _, s := range Settings() {
		env[s.Env] = s.Path
	}
	doc := string(data)
	for v, path := range env {
		row := regexp.MustCompile("(?m)^\\| `" + regexp.QuoteMeta(path) + "` \\|.*\\|$").FindString(doc)
		if row == "" {
			t.Errorf("docs/configuration.md has no row for %s", path)
		} else if !strings.Contains(row, "`"+v+"`") {
			t.Errorf("docs/configuration.md row of %s does not name %s", path, v)
		}
	}
	for _, m := range regexp.MustCompile(`DISTRIBUTOR_[A-Z0-9_]+`).FindAllString(doc, -1) {
		stream := m == "DISTRIBUTOR_BUNDLES" || m == "DISTRIBUTOR_EVENTS" || m == "DISTRIBUTOR_LEASES"
		if _, ok := env[m]; !stream && !ok {
			t.Errorf("docs/configuration.md mentions %s, which the environment does not set", m)
		}
	}
}

// TestConfigurationDocExamplesParse: every ```yaml config block of
// docs/configuration.md is a valid configuration.
func TestConfigurationDocExamplesParse(t *testing.T) {
	data, err := os.ReadFile(configurationDoc)
	if err != nil {
		t.Fatal(err)
	}
	blocks := regexp.MustCompile("(?s)```yaml config\n(.*?)```").FindAllStringSubmatch(string(data), -1)
	if len(blocks) == 0 {
		t.Fatal("no ```yaml config block in docs/configuration.md")
	}
	for i, b := range blocks {
		if _, err := Parse([]byte(b[1]), filepath.Join(t.TempDir(), "distributor.yaml")); err != nil {
			t.Errorf("example %d of docs/configuration.md: %v", i+1, err)
		}
	}
}

// TestConfigurationDocKeysUnderTheirHeading: a nested key's row
// (`nats.url`, `pipelines[].id`) lies under the heading of its top-level
// key (### `nats`, ### `pipelines`), so the page's outline finds it.
func TestConfigurationDocKeysUnderTheirHeading(t *testing.T) {
	data, err := os.ReadFile(configurationDoc)
	if err != nil {
		t.Fatal(err)
	}
	row := regexp.MustCompile("^\\| `([a-z0-9_]+)(\\[\\])?\\.[a-z0-9_.\\[\\]]+` \\|")
	heading, checked := "", 0
	for line := range strings.SplitSeq(string(data), "\n") {
		if strings.HasPrefix(line, "#") {
			heading = strings.TrimLeft(line, "# ")
			continue
		}
		m := row.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		checked++
		if want := "`" + m[1] + "`"; heading != want {
			t.Errorf("%s: the row of %s is under the heading %q, want ### %s", configurationDoc, strings.Fields(line)[1], heading, want)
		}
	}
	if checked < 40 {
		t.Fatalf("checked %d nested keys, want at least 40: is the table parser still finding them?", checked)
	}
}
