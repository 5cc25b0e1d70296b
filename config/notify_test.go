package config

import (
	"testing"
	"time"
)

// notifyDest is a destination with links.base_url, ready for a notify block.
const notifyDest = `destinations:
  - id: a
    backend: local
    path: /srv/a
    links: {base_url: "https://example.com/r/"}
    notify:
`

func TestNotifyParse(t *testing.T) {
	c, err := Parse([]byte(notifyDest+`      - type: webhook
        url: https://hooks.example.com/x
        secret_env: HOOK_SECRET
      - type: cloudfront
        distribution_id: E123
        on: [published, failed]
      - {type: purge, concurrency: 2}
      - {type: webhook, url: "http://b/", name: second}
`), "config.yaml")
	if err != nil {
		t.Fatal(err)
	}
	d := c.Destinations[0]
	if len(d.Notify) != 4 {
		t.Fatalf("notify = %+v", d.Notify)
	}
	w, cf, p := d.Notify[0], d.Notify[1], d.Notify[2]
	if len(w.On) != 1 || w.On[0] != "published" || time.Duration(w.Timeout) != 10*time.Second || time.Duration(w.MaxAge) != time.Hour {
		t.Errorf("webhook defaults: %+v", w)
	}
	if cf.MaxPaths != 15 || !cf.Wants("failed") || cf.Wants("collision") {
		t.Errorf("cloudfront: %+v", cf)
	}
	if p.Method != "PURGE" || p.Concurrency != 2 {
		t.Errorf("purge: %+v", p)
	}
	for i, want := range []string{"webhook_0", "cloudfront", "purge", "second"} {
		if got := d.NotifyName(i); got != want {
			t.Errorf("name of notify[%d] = %q, want %q", i, got, want)
		}
	}
	if !c.HasNotify() {
		t.Error("HasNotify = false")
	}
}

func TestNotifyParseErrors(t *testing.T) {
	for _, tc := range []struct{ name, yaml, want string }{
		{"unknown key", "      - {type: webhook, url: 'http://x/', secrt_env: X}\n",
			`config.yaml:7: unknown key "secrt_env" in destinations[0].notify[0]: did you mean "secret_env"?`},
		{"no type", "      - {url: 'http://x/'}\n",
			`config.yaml:7: destinations[0] (a): notify[0].type is missing: use "webhook", "cloudfront" or "purge"`},
		{"unknown type", "      - {type: slack}\n",
			`config.yaml:7: destinations[0] (a): notify[0].type "slack" is not known: use "webhook", "cloudfront" or "purge"`},
		{"webhook url", "      - {type: webhook, url: 'ftp://x/'}\n",
			`config.yaml:7: destinations[0] (a): notify[0] (webhook).url "ftp://x/" must be an absolute http(s) URL, e.g. "https://ci.example.com/hooks/distributor"`},
		{"bad on", "      - {type: webhook, url: 'http://x/', on: [pruned]}\n",
			`config.yaml:7: destinations[0] (a): notify[0] (webhook).on: "pruned" is not a result type: use published, superseded, collision, failed`},
		{"key of another type", "      - {type: webhook, url: 'http://x/', distribution_id: E1}\n",
			`config.yaml:7: destinations[0] (a): notify[0] (webhook).distribution_id is only for cloudfront targets: remove it`},
		{"cloudfront id", "      - {type: cloudfront}\n",
			`config.yaml:7: destinations[0] (a): notify[0] (cloudfront).distribution_id is missing: give the CloudFront distribution's id, e.g. "E2QWRUHAPOMQZL"`},
		{"path prefix", "      - {type: cloudfront, distribution_id: E1, path_prefix: r}\n",
			`config.yaml:7: destinations[0] (a): notify[0] (cloudfront).path_prefix "r" must start and end with "/", e.g. "/reports/"`},
		{"duplicate name", "      - {type: webhook, url: 'http://x/', name: n}\n      - {type: purge, name: n}\n",
			`config.yaml:8: destinations[0] (a): notify[1] (purge).name "n" is used by another target of this destination: give each a name of its own`},
		{"name with dash", "      - {type: purge, name: my-purge}\n",
			`config.yaml:7: destinations[0] (a): notify[0] (purge).name "my-purge" has '-': use only letters, digits and '_'`},
		{"secret env name", "      - {type: webhook, url: 'http://x/', secret_env: 'A B'}\n",
			`config.yaml:7: destinations[0] (a): notify[0] (webhook).secret_env "A B" must name an environment variable (letters, digits and '_'), e.g. "WEBHOOK_SECRET"`},
		{"zero max_age", "      - {type: webhook, url: 'http://x/', max_age: 0s}\n",
			`config.yaml:7: destinations[0] (a): notify[0].max_age must be a positive duration such as "30s"`},
	} {
		_, err := Parse([]byte(notifyDest+tc.yaml), "config.yaml")
		if err == nil || err.Error() != tc.want {
			t.Errorf("%s:\n got %v\nwant %s", tc.name, err, tc.want)
		}
	}
	// purge needs links.base_url
	_, err := Parse([]byte("destinations:\n  - id: a\n    backend: local\n    path: /srv/a\n    notify: [{type: purge}]\n"), "config.yaml")
	if want := `config.yaml:5: destinations[0] (a): notify[0] (purge) needs links.base_url on the destination: the URLs to purge are made from it`; err == nil || err.Error() != want {
		t.Errorf("purge without base_url:\n got %v\nwant %s", err, want)
	}
}

func TestNotifySecretFromEnv(t *testing.T) {
	c, err := Parse([]byte(notifyDest+"      - {type: webhook, url: 'http://x/', secret_env: HOOK_SECRET_FOR_TEST}\n"), "config.yaml")
	if err != nil {
		t.Fatal(err)
	}
	want := `config.yaml: destinations[0] (a): notify[0] (webhook): secret_env HOOK_SECRET_FOR_TEST is not set in the environment: export it with the webhook's secret`
	if err := c.SecretsFromEnv(); err == nil || err.Error() != want {
		t.Errorf("got %v\nwant %s", err, want)
	}
	t.Setenv("HOOK_SECRET_FOR_TEST", "s3cret")
	if err := c.SecretsFromEnv(); err != nil {
		t.Error(err)
	}
}
