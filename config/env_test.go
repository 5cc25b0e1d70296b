package config

import (
	"errors"
	"os"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"
)

// sample is a valid value of each type, as a variable and as the field.
func sample(typ string) (string, any) {
	switch typ {
	case "boolean":
		return "true", true
	case "integer":
		return "3", 3
	case "duration":
		return "1d12h", Duration(36 * time.Hour)
	case "durations":
		return "2s, 1d", []Duration{Duration(2 * time.Second), Duration(24 * time.Hour)}
	}
	return "", nil
}

// TestApplyEnvEveryKey: every key of the table is set by its variable,
// and is a key the file accepts too.
func TestApplyEnvEveryKey(t *testing.T) {
	strs := map[string]string{
		"nats.url": "nats://env:4222", "nats.listen": "127.0.0.1:4333", "nats.subject_prefix": "envp",
		"s3.endpoint": "http://127.0.0.1:9000", "nats.user": "envuser", "http.listen": "127.0.0.1:9191",
	}
	for _, s := range Settings() {
		t.Run(s.Path, func(t *testing.T) {
			v, want := sample(s.Type)
			if s.Type == "string" {
				v = strs[s.Path]
				if v == "" {
					v = "/env/" + s.Path
				}
				want = v
			}
			file := "nats: {}\n"
			if s.Path == "nats.password" {
				file = "nats: {user: u}\n" // a password needs a user
			}
			if strings.HasPrefix(s.Path, "nats.tls.") || strings.HasPrefix(s.Path, "nats.server_tls.") {
				// cert and key come in pairs; set the partner in the file.
				file = "nats: {tls: {cert: /c, key: /k}, server_tls: {cert: /c, key: /k}}\n"
			}
			c, err := Parse([]byte(file), "")
			if err != nil {
				t.Fatal(err)
			}
			if err := c.ApplyEnv(func(k string) (string, bool) { return v, k == s.Env }); err != nil {
				t.Fatalf("%s=%q: %v", s.Env, v, err)
			}
			i := slices.IndexFunc(settings, func(x setting) bool { return x.path == s.Path })
			if got := reflect.ValueOf(settings[i].field(c)).Elem().Interface(); !reflect.DeepEqual(got, want) {
				t.Errorf("%s=%q: %s = %v, want %v", s.Env, v, s.Path, got, want)
			}
			// The file knows the key (nothing is settable only from the
			// environment).
			parts := strings.Split(s.Path, ".")
			y := ""
			for i, p := range parts {
				y += strings.Repeat("  ", i) + p + ":"
				if i < len(parts)-1 {
					y += "\n"
				}
			}
			if _, err := Parse([]byte(y+" "+strings.ReplaceAll(v, ":", "")+"\n"), ""); err != nil && strings.Contains(err.Error(), "unknown key") {
				t.Errorf("the file does not accept %s: %v", s.Path, err)
			}
		})
	}
}

func TestApplyEnvTypes(t *testing.T) {
	const file = `s3:
  timeouts: {connect: 5s}
destinations:
  - {id: inherit, backend: s3, bucket: b1}
  - {id: own, backend: s3, bucket: b2, path_style: true, timeouts: {connect: 2s}}
`
	c, err := Parse([]byte(file), "")
	if err != nil {
		t.Fatal(err)
	}
	env := map[string]string{
		"DISTRIBUTOR_S3_TIMEOUTS_CONNECT":  "90s",
		"DISTRIBUTOR_S3_TIMEOUTS_ATTEMPTS": "5",
		"DISTRIBUTOR_S3_PATH_STYLE":        "true",
		"DISTRIBUTOR_NATS_EVENT_MAX_AGE":   "7d",
	}
	if err := c.ApplyEnv(func(k string) (string, bool) { v, ok := env[k]; return v, ok }); err != nil {
		t.Fatal(err)
	}
	want := S3Timeouts{Connect: Duration(90 * time.Second), Attempts: 5}
	if c.S3.Timeouts != want || !c.S3.PathStyle || c.NATS.EventMaxAge != Duration(7*day) {
		t.Errorf("S3 %+v, event_max_age %v", c.S3, c.NATS.EventMaxAge)
	}
	// A destination that left a key out takes the new default; one that
	// set its own keeps it.
	if d, _ := c.Destination("inherit"); d.Timeouts != want || !d.PathStyle {
		t.Errorf("inherit: timeouts %+v, path_style %v; want %+v, true", d.Timeouts, d.PathStyle, want)
	}
	if d, _ := c.Destination("own"); d.Timeouts != (S3Timeouts{Connect: Duration(2 * time.Second), Attempts: 5}) {
		t.Errorf("own: timeouts %+v, want its own connect 2s and attempts 5", d.Timeouts)
	}

	bad := []struct{ k, v, want string }{
		{"DISTRIBUTOR_S3_PATH_STYLE", "maybe", `DISTRIBUTOR_S3_PATH_STYLE: "maybe": use true or false`},
		{"DISTRIBUTOR_S3_TIMEOUTS_ATTEMPTS", "0", `DISTRIBUTOR_S3_TIMEOUTS_ATTEMPTS: "0": must be at least 1`},
		{"DISTRIBUTOR_S3_TIMEOUTS_IDLE", "0s", `DISTRIBUTOR_S3_TIMEOUTS_IDLE: "0s": must be a positive duration such as "30s"`},
		{"DISTRIBUTOR_NATS_BUNDLE_MAX_AGE", "soon", `DISTRIBUTOR_NATS_BUNDLE_MAX_AGE: invalid duration "soon": use a Go duration like "90m" or "720h", or whole days like "30d"`},
		{"DISTRIBUTOR_NATS_LISTEN", "nowhere", `DISTRIBUTOR_NATS_LISTEN "nowhere" must be host:port, e.g. "127.0.0.1:4222"`},
	}
	before := *c
	for _, b := range bad {
		err := c.ApplyEnv(func(k string) (string, bool) { return b.v, k == b.k })
		if err == nil || err.Error() != b.want || !errors.Is(err, ErrInvalid) {
			t.Errorf("%s=%q: err = %v, want %s", b.k, b.v, err, b.want)
		}
	}
	if !reflect.DeepEqual(*c, before) {
		t.Errorf("a refused variable changed the configuration")
	}
}

// TestEnvTableInConfigurationDoc: the "Environment variables" table of
// docs/configuration.md lists exactly the variables of Settings, in order,
// with key, type and secrecy.
func TestEnvTableInConfigurationDoc(t *testing.T) {
	data, err := os.ReadFile("../docs/configuration.md")
	if err != nil {
		t.Fatal(err)
	}
	_, sec, ok := strings.Cut(string(data), "\n## Environment variables\n")
	if !ok {
		t.Fatal(`docs/configuration.md has no "## Environment variables" section`)
	}
	sec, _, _ = strings.Cut(sec, "\n## ")
	row := regexp.MustCompile("(?m)^\\| `(DISTRIBUTOR_[A-Z0-9_]+)` \\| `([a-z0-9_.]+)` \\| ([a-z]+) \\|(.*)\\|$")
	var got, want []string
	for _, m := range row.FindAllStringSubmatch(sec, -1) {
		got = append(got, strings.TrimSpace(strings.Join([]string{m[1], m[2], m[3], strings.TrimSpace(m[4])}, " ")))
	}
	for _, s := range Settings() {
		note := ""
		if s.Secret {
			note = "secret: never printed"
		}
		want = append(want, strings.TrimSpace(strings.Join([]string{s.Env, s.Path, s.Type, note}, " ")))
	}
	if !slices.Equal(got, want) {
		t.Errorf("docs/configuration.md table rows:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

func TestKnownPipelines(t *testing.T) {
	for _, tt := range []struct {
		ids  []string
		want string
	}{
		{nil, "the configuration has no pipelines: add it under pipelines"},
		{[]string{"a"}, "known pipelines: a"},
		{[]string{"a", "b"}, "known pipelines: a, b"},
	} {
		var c Config
		for _, id := range tt.ids {
			c.Pipelines = append(c.Pipelines, Pipeline{ID: id})
		}
		if got := c.KnownPipelines(); got != tt.want {
			t.Errorf("%v: %q, want %q", tt.ids, got, tt.want)
		}
	}
}
