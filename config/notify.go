package config

import (
	"fmt"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Notify target types.
const (
	NotifyWebhook    = "webhook"
	NotifyCloudFront = "cloudfront"
	NotifyPurge      = "purge"
)

// Defaults of a notify target.
const (
	DefaultNotifyTimeout     = Duration(10 * time.Second)
	DefaultNotifyMaxAge      = Duration(time.Hour)
	DefaultNotifyMaxPaths    = 15
	DefaultNotifyMethod      = "PURGE"
	DefaultNotifyConcurrency = 4
)

// notifyResultTypes are the result types a target may ask for in `on`.
var notifyResultTypes = []string{"published", "superseded", "collision", "failed"}

// NotifyTarget is one downstream system told about a destination's
// results: a webhook, a CloudFront distribution or a purging cache.
type NotifyTarget struct {
	Type string `yaml:"type"` // NotifyWebhook, NotifyCloudFront or NotifyPurge

	// Name tells the destination's targets apart in metrics, events and
	// the NATS consumer that drives it; default: the type, or
	// "<type>_<index>" when the destination has two targets of that type.
	Name string `yaml:"name"`

	// On are the result types delivered.
	On []string `yaml:"on" default:"published"`

	// Webhook: where the result is posted, and the environment variable
	// holding the HMAC secret that signs it ("" = not signed).
	URL       string `yaml:"url"`
	SecretEnv string `yaml:"secret_env"`

	// Timeout bounds one attempt; MaxAge is how long after the result a
	// failing delivery is retried before it is given up.
	Timeout Duration `yaml:"timeout" default:"10s" cfg:"positive"`
	MaxAge  Duration `yaml:"max_age" default:"1h" cfg:"positive"`

	// CloudFront: the distribution, and an endpoint other than AWS's.
	DistributionID string `yaml:"distribution_id"`
	Endpoint       string `yaml:"endpoint"`

	// PathPrefix is the URL path the destination's root is served under
	// (cloudfront); default: the path of links.base_url, else "/".
	PathPrefix string `yaml:"path_prefix"`

	// MaxPaths bounds the paths of one invalidation; more are folded into
	// prefix wildcards.
	MaxPaths int `yaml:"max_paths" default:"15" cfg:"positive"`

	// Purge: the request's method and how many run at once.
	Method      string `yaml:"method" default:"PURGE"`
	Concurrency int    `yaml:"concurrency" default:"4" cfg:"positive"`
}

// NotifyName is the target's name: Name, or its default (see NotifyTarget).
func (d Destination) NotifyName(i int) string {
	t := d.Notify[i]
	if t.Name != "" {
		return t.Name
	}
	for j, o := range d.Notify {
		if j != i && o.Type == t.Type {
			return t.Type + "_" + strconv.Itoa(i)
		}
	}
	return t.Type
}

// Wants reports whether the target delivers results of type typ.
func (t NotifyTarget) Wants(typ string) bool { return slices.Contains(t.On, typ) }

// Secret is the webhook's signing secret, read from SecretEnv; "" when
// SecretEnv is not set. An empty or unset variable is an error naming it.
func (t NotifyTarget) Secret(lookup func(string) (string, bool)) (string, error) {
	if t.SecretEnv == "" {
		return "", nil
	}
	if v, ok := lookup(t.SecretEnv); ok && v != "" {
		return v, nil
	}
	return "", &Error{Msg: fmt.Sprintf("secret_env names %s, which is not set in the environment: set it to the webhook's secret", t.SecretEnv)}
}

// SecretsFromEnv checks that every webhook's secret_env is set in this
// process's environment: serve and apply call it before delivering.
func (c *Config) SecretsFromEnv() error {
	for j, d := range c.Destinations {
		for i, t := range d.Notify {
			if _, err := t.Secret(os.LookupEnv); err != nil {
				return &Error{File: c.File, Msg: fmt.Sprintf("%s: notify[%d] (%s): secret_env %s is not set in the environment: export it with the webhook's secret",
					label("destinations", j, d.ID), i, d.NotifyName(i), t.SecretEnv), Err: err}
			}
		}
	}
	return nil
}

// HasNotify reports whether any destination has a notify target.
func (c *Config) HasNotify() bool {
	for _, d := range c.Destinations {
		if len(d.Notify) > 0 {
			return true
		}
	}
	return false
}

// validateNotify checks the destination's notify targets.
func (d Destination) validateNotify(e *destErrs) {
	names := map[string]bool{}
	for i, t := range d.Notify {
		k := "notify[" + strconv.Itoa(i) + "]"
		what := k + " (" + orQuoted(t.Type) + ")"
		switch t.Type {
		case NotifyWebhook, NotifyCloudFront, NotifyPurge:
		case "":
			e.add(k+".type", "%s.type is missing: use %q, %q or %q", k, NotifyWebhook, NotifyCloudFront, NotifyPurge)
			continue
		default:
			e.add(k+".type", "%s.type %q is not known: use %q, %q or %q", k, t.Type, NotifyWebhook, NotifyCloudFront, NotifyPurge)
			continue
		}
		name := d.NotifyName(i)
		switch {
		case checkNotifyName(name) != "":
			e.add(k+".name", "%s.name %q %s", what, name, checkNotifyName(name))
		case names[name]:
			e.add(k+".name", "%s.name %q is used by another target of this destination: give each a name of its own", what, name)
		}
		names[name] = true
		if len(t.On) == 0 {
			e.add(k+".on", "%s.on is empty: list the result types to deliver, e.g. [published]", what)
		}
		for _, typ := range t.On {
			if !slices.Contains(notifyResultTypes, typ) {
				e.add(k+".on", "%s.on: %q is not a result type: use %s", what, typ, strings.Join(notifyResultTypes, ", "))
			}
		}
		d.validateNotifyType(e, k, what, t)
	}
}

// validateNotifyType checks the keys of the target's type, and that it
// sets none of another type's.
func (d Destination) validateNotifyType(e *destErrs, k, what string, t NotifyTarget) {
	only := func(key, typ string, set bool) {
		if set && t.Type != typ {
			e.add(k+"."+key, "%s.%s is only for %s targets: remove it", what, key, typ)
		}
	}
	only("url", NotifyWebhook, t.URL != "")
	only("secret_env", NotifyWebhook, t.SecretEnv != "")
	only("distribution_id", NotifyCloudFront, t.DistributionID != "")
	only("endpoint", NotifyCloudFront, t.Endpoint != "")
	only("path_prefix", NotifyCloudFront, t.PathPrefix != "")
	only("max_paths", NotifyCloudFront, t.MaxPaths != DefaultNotifyMaxPaths)
	only("method", NotifyPurge, t.Method != DefaultNotifyMethod)
	only("concurrency", NotifyPurge, t.Concurrency != DefaultNotifyConcurrency)
	switch t.Type {
	case NotifyWebhook:
		if u, err := url.Parse(t.URL); t.URL == "" || err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			e.add(k+".url", "%s.url %q must be an absolute http(s) URL, e.g. \"https://ci.example.com/hooks/distributor\"", what, t.URL)
		}
		if t.SecretEnv != "" && !validEnvName(t.SecretEnv) {
			e.add(k+".secret_env", "%s.secret_env %q must name an environment variable (letters, digits and '_'), e.g. \"WEBHOOK_SECRET\"", what, t.SecretEnv)
		}
	case NotifyCloudFront:
		if t.DistributionID == "" {
			e.add(k+".distribution_id", "%s.distribution_id is missing: give the CloudFront distribution's id, e.g. \"E2QWRUHAPOMQZL\"", what)
		}
		if t.Endpoint != "" {
			if msg := checkEndpoint(t.Endpoint); msg != "" {
				e.add(k+".endpoint", "%s.endpoint %q: %s", what, t.Endpoint, msg)
			}
		}
		if t.PathPrefix != "" && (!strings.HasPrefix(t.PathPrefix, "/") || !strings.HasSuffix(t.PathPrefix, "/")) {
			e.add(k+".path_prefix", "%s.path_prefix %q must start and end with \"/\", e.g. \"/reports/\"", what, t.PathPrefix)
		}
	case NotifyPurge:
		if d.Links.BaseURL == "" {
			e.add(k, "%s needs links.base_url on the destination: the URLs to purge are made from it", what)
		}
		if t.Method == "" || strings.ContainsAny(t.Method, " \t\r\n") {
			e.add(k+".method", "%s.method %q must be an HTTP method, e.g. %q", what, t.Method, DefaultNotifyMethod)
		}
	}
}

// checkNotifyName allows letters, digits and '_': the name ends the NATS
// consumer's name after a '-', so it has none itself.
func checkNotifyName(s string) string {
	for _, r := range s {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '_') {
			return fmt.Sprintf("has %q: use only letters, digits and '_'", r)
		}
	}
	return ""
}

func validEnvName(s string) bool {
	for i, r := range s {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r == '_' || i > 0 && r >= '0' && r <= '9') {
			return false
		}
	}
	return s != ""
}

func orQuoted(s string) string {
	if s == "" {
		return "no type"
	}
	return s
}
