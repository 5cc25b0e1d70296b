package config

import (
	"fmt"
	"net"
	"net/url"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/bmatcuk/doublestar/v4"

	"github.com/distributor/distributor/catalog"
	"github.com/distributor/distributor/planner"
)

// errList collects problems, each keyed by the field's structural path
// ("destinations[0].workflow") so Parse can locate it in the file.
type errList []fieldErr

func (e *errList) add(key, format string, args ...any) {
	*e = append(*e, fieldErr{key, fmt.Sprintf(format, args...)})
}

// validate lists every problem in document order of the struct (nats, http,
// s3, pipelines, destinations).
func (c *Config) validate() []fieldErr {
	var errs errList
	c.NATS.validate(&errs)
	if msg := CheckHTTPListen(c.HTTP.Listen); msg != "" {
		errs.add("http.listen", "http.listen %q: %s", c.HTTP.Listen, msg)
	}
	if c.S3.Endpoint != "" {
		if msg := checkEndpoint(c.S3.Endpoint); msg != "" {
			errs.add("s3.endpoint", "s3.endpoint %q: %s", c.S3.Endpoint, msg)
		}
	}
	dests := map[string]int{} // id -> index of its first destination
	for i, d := range c.Destinations {
		if _, dup := dests[d.ID]; !dup && d.ID != "" {
			dests[d.ID] = i
		}
	}
	c.validatePipelines(&errs, dests)
	c.validateDestinations(&errs, dests)
	return errs
}

func (n NATS) validate(errs *errList) {
	if n.URL != "" {
		if msg := checkNATSURL(n.URL); msg != "" {
			errs.add("nats.url", "nats.url %q: %s", RedactURL(n.URL), msg)
		}
	}
	if _, port, err := net.SplitHostPort(n.Listen); err != nil || !validPort(port) {
		errs.add("nats.listen", "nats.listen %q must be host:port, e.g. %q", n.Listen, DefaultListen)
	}
	if n.StoreDir == "" {
		errs.add("nats.store_dir", "nats.store_dir is empty: set a folder for the embedded server's data, e.g. %q", DefaultStoreDir)
	}
	if msg := checkSubjectPrefix(n.SubjectPrefix); msg != "" {
		errs.add("nats.subject_prefix", "nats.subject_prefix %q: %s", n.SubjectPrefix, msg)
	}
	if n.Password != "" && n.User == "" {
		errs.add("nats.password", "nats.password is set without nats.user: set both or neither")
	}
	if msg := checkAuth(n); msg != "" {
		errs.add(authKey(n), "%s", msg)
	}
	if (n.TLS.Cert == "") != (n.TLS.Key == "") {
		errs.add("nats.tls", "nats.tls needs both cert and key for a client certificate, or neither")
	}
	if (n.ServerTLS.Cert == "") != (n.ServerTLS.Key == "") {
		errs.add("nats.server_tls", "nats.server_tls needs both cert and key (the embedded server's certificate), or neither")
	}
	if n.ServerTLS.ClientCA != "" && n.ServerTLS.Cert == "" {
		errs.add("nats.server_tls", "nats.server_tls.client_ca needs cert and key: mutual TLS is TLS first")
	}
	if n.BundleMaxAge < 0 {
		errs.add("nats.bundle_max_age", "nats.bundle_max_age must not be negative (0 = no limit)")
	}
	if n.EventMaxAge < 0 {
		errs.add("nats.event_max_age", "nats.event_max_age must not be negative (0 = no limit)")
	}
	if n.Replicas < 1 || n.Replicas > MaxReplicas {
		errs.add("nats.replicas", "nats.replicas must be 1 to %d (3 on a 3-node NATS cluster), got %d", MaxReplicas, n.Replicas)
	}
}

// validatePipelines checks ids and that each listed destination exists
// (dests maps ids to their first index) once.
func (c *Config) validatePipelines(errs *errList, dests map[string]int) {
	pipes := map[string]int{}
	for i, p := range c.Pipelines {
		k := "pipelines[" + strconv.Itoa(i) + "]"
		lbl := label("pipelines", i, p.ID)
		switch {
		case p.ID == "":
			errs.add(k+".id", "%s: id is missing: set the producer's pipeline id, e.g. \"weatherreporter.daily\"", lbl)
		case checkID(p.ID) != "":
			errs.add(k+".id", "%s: id %q %s", lbl, p.ID, checkID(p.ID))
		case strings.HasPrefix(p.ID, ".") || strings.HasSuffix(p.ID, ".") || strings.Contains(p.ID, ".."):
			errs.add(k+".id", "%s: id %q must not start or end with '.' or contain \"..\" (it becomes NATS subject tokens)", lbl, p.ID)
		default:
			if j, dup := pipes[p.ID]; dup {
				errs.add(k+".id", "%s: duplicate pipeline id %q (also pipelines[%d]): ids must be unique", lbl, p.ID, j)
			} else {
				pipes[p.ID] = i
			}
		}
		if len(p.Destinations) == 0 {
			errs.add(k+".destinations", "%s: no destinations: list at least one destination id under destinations", lbl)
		}
		seen := map[string]bool{}
		for j, id := range p.Destinations {
			dk := k + ".destinations[" + strconv.Itoa(j) + "]"
			if _, ok := dests[id]; !ok {
				errs.add(dk, "%s: unknown destination %q: define it under destinations or remove it", lbl, id)
			} else if seen[id] {
				errs.add(dk, "%s: destination %q is listed twice: remove one", lbl, id)
			}
			seen[id] = true
		}
		for j, loc := range p.BundleLocations {
			if msg := checkBundleLocation(loc); msg != "" {
				errs.add(k+".bundle_locations["+strconv.Itoa(j)+"]", "%s: bundle_locations entry %q %s", lbl, loc, msg)
			}
		}
	}
}

// root is a destination root already checked, for comparing the next ones.
type root struct {
	key    string // RootKey: the identity leases use
	onDisk string // key with symlinks resolved (local roots)
	i      int
}

// validateDestinations checks each destination, unique ids, and that roots
// are not system folders and are equal or disjoint.
func (c *Config) validateDestinations(errs *errList, dests map[string]int) {
	var roots []root
	var system map[string]bool // system folders, literal and resolved; built on first use
	for i, d := range c.Destinations {
		*errs = append(*errs, d.validate(i)...)
		k := "destinations[" + strconv.Itoa(i) + "]"
		lbl := label("destinations", i, d.ID)
		if j := dests[d.ID]; d.ID != "" && j != i {
			errs.add(k+".id", "%s: duplicate destination id %q (also destinations[%d]): ids must be unique", lbl, d.ID, j)
		}
		if !d.hasRoot() {
			continue
		}
		r := root{key: d.RootKey(), i: i}
		r.onDisk = r.key
		if d.Backend == BackendLocal {
			if system == nil {
				system = systemFolders()
			}
			p := localPath(d.Path)
			rp := ResolvePath(p)

			// Its catalog and replacement deletes would sit among the
			// system's own files.
			if system[p] {
				errs.add(k+".path", "%s: path %q is a system folder: give the destination a folder of its own, e.g. %q", lbl, d.Path, "/srv/reports")
				continue
			}
			if system[rp] {
				errs.add(k+".path", "%s: path %q resolves through symlinks to the system folder %q: give the destination a folder of its own, e.g. %q", lbl, d.Path, rp, "/srv/reports")
				continue
			}
			r.onDisk = fileKey(rp)
		}
		if msg := c.rootConflict(r, roots); msg != "" {
			errs.add(k+".path", "%s: %s", lbl, msg)
		}
		roots = append(roots, r)
	}
}

// rootConflict: roots must be equal (shared) or disjoint. A root inside
// another would be unmanaged content, and its catalog a file, of the outer
// one. Symlinks count: the folders on disk decide, not the spelling.
func (c *Config) rootConflict(r root, roots []root) string {
	for _, o := range roots {
		other := label("destinations", o.i, c.Destinations[o.i].ID)
		switch {
		case r.key == o.key:
			// a shared root: one lease, one catalog
		case nested(r.key, o.key):
			return fmt.Sprintf("root %s is nested with the root of %s (%s): destination roots must be the same or not nested",
				r.key, other, o.key)
		case r.onDisk == o.onDisk:
			// Two spellings of one folder would take two leases on it.
			return fmt.Sprintf("root %s is the same folder as the root of %s (%s) through symlinks (both are %s): write the same path in both to share the root, or give each its own folder",
				r.key, other, o.key, r.onDisk)
		case nested(r.onDisk, o.onDisk):
			return fmt.Sprintf("root %s is nested with the root of %s (%s) through symlinks (%s and %s): destination roots must be the same or not nested",
				r.key, other, o.key, r.onDisk, o.onDisk)
		}
	}
	return ""
}

// nested reports whether one root key lies strictly inside the other (keys
// end in "/", so "/a/" does not contain "/ab/").
func nested(a, b string) bool {
	return a != b && (strings.HasPrefix(a, b) || strings.HasPrefix(b, a))
}

// systemFolders are the operating system's top-level folders, also as their
// symlinks resolve (e.g. /bin -> /usr/bin, macOS /etc -> /private/etc).
func systemFolders() map[string]bool {
	m := map[string]bool{}
	for _, p := range []string{
		"/", "/bin", "/boot", "/dev", "/etc", "/home", "/lib", "/lib32", "/lib64", "/proc", "/root",
		"/run", "/sbin", "/sys", "/tmp", "/usr", "/var",
		"/private", "/private/etc", "/private/tmp", "/private/var", "/System", "/Users", // macOS
	} {
		m[p] = true
		if r, err := filepath.EvalSymlinks(p); err == nil {
			m[r] = true
		}
	}
	return m
}

// localPath is a local root as an absolute, clean path.
func localPath(p string) string {
	if abs, err := filepath.Abs(p); err == nil {
		p = abs
	}
	return filepath.Clean(p)
}

// ResolvePath resolves the symlinks of the absolute, clean path p's longest
// existing prefix and appends the rest (folders not created yet hold no
// symlinks): the folder p names on disk, as far as it exists.
func ResolvePath(p string) string {
	rest := ""
	for cur := p; ; {
		if r, err := filepath.EvalSymlinks(cur); err == nil {
			return filepath.Join(r, rest)
		}
		parent := filepath.Dir(cur)
		if parent == cur {
			return p
		}
		rest = filepath.Join(filepath.Base(cur), rest)
		cur = parent
	}
}

// hasRoot reports whether d names a root well enough to compare it.
func (d Destination) hasRoot() bool {
	switch d.Backend {
	case BackendLocal:
		return d.Path != ""
	case BackendS3:
		return d.Bucket != "" && checkS3Prefix(d.Path) == ""
	}
	return false
}

// destErrs collects one destination's problems, prefixing its label and
// key.
type destErrs struct {
	errs     []fieldErr
	key, lbl string
}

func (e *destErrs) add(field, format string, args ...any) {
	e.errs = append(e.errs, fieldErr{join(e.key, field), e.lbl + ": " + fmt.Sprintf(format, args...)})
}

func (d Destination) validate(i int) []fieldErr {
	e := &destErrs{key: "destinations[" + strconv.Itoa(i) + "]", lbl: label("destinations", i, d.ID)}
	switch {
	case d.ID == "":
		e.add("id", "id is missing: give the destination a unique id, e.g. \"latest-html\"")
	case checkID(d.ID) != "":
		e.add("id", "id %q %s", d.ID, checkID(d.ID))
	case strings.Contains(d.ID, "."):
		e.add("id", "id %q must not contain '.' (it is one NATS subject token); use '-' or '_'", d.ID)
	}
	d.validateBackend(e)
	if d.Workflow == "" {
		e.add("workflow", "workflow is missing: use %q or %q", planner.Replacement, planner.Additive)
	} else if _, err := planner.ParseWorkflow(string(d.Workflow)); err != nil {
		e.add("workflow", "%v", err)
	}
	if msg := checkLayout(d.Layout.Prefix); msg != "" {
		e.add("layout.prefix", "layout.prefix %q: %s", d.Layout.Prefix, msg)
	}
	d.validateOutputs(e)
	d.validateNotify(e)
	if d.Retention.MaxAge < 0 {
		e.add("retention.max_age", "retention.max_age must not be negative (0 = prune needs --older-than)")
	}
	if d.MaxDeletes < 0 {
		e.add("max_deletes", "max_deletes must be 0 (no limit) or more, got %d", d.MaxDeletes)
	}
	for j, g := range d.PublishLast {
		if g == "" || !doublestar.ValidatePattern(g) {
			e.add("publish_last["+strconv.Itoa(j)+"]", "publish_last %q is not a valid glob over output paths (check brackets and braces), e.g. \"**/*.html\"", g)
		}
	}
	if d.RetainPrevious < 0 {
		e.add("retain_previous", "retain_previous must not be negative (0 = dropped paths are deleted at once)")
	}
	return e.errs
}

// validateBackend checks the backend and the root it names.
func (d Destination) validateBackend(e *destErrs) {
	switch d.Backend {
	case BackendLocal:
		if d.Path == "" {
			e.add("path", "local destination needs path: the folder to publish into")
		}
		for _, f := range []struct {
			name string
			set  bool
		}{{"bucket", d.Bucket != ""}, {"region", d.Region != ""}, {"endpoint", d.Endpoint != ""}, {"path_style", d.PathStyle}, {"timeouts", d.Timeouts != (S3Timeouts{})}} {
			if f.set {
				e.add(f.name, "%s is only for s3 destinations: remove it or set backend: s3", f.name)
			}
		}
	case BackendS3:
		switch {
		case d.Bucket == "":
			e.add("bucket", "s3 destination needs bucket")
		case strings.ContainsAny(d.Bucket, "/ \\") || strings.Contains(d.Bucket, "://"):
			e.add("bucket", "bucket %q must be a bare bucket name; put the key prefix in path", d.Bucket)
		}
		if msg := checkS3Prefix(d.Path); msg != "" {
			e.add("path", "path %q %s", d.Path, msg)
		}
		if d.Endpoint != "" {
			if msg := checkEndpoint(d.Endpoint); msg != "" {
				e.add("endpoint", "endpoint %q: %s", d.Endpoint, msg)
			}
		}
	case "":
		e.add("backend", `backend is missing: use "local" or "s3"`)
	default:
		e.add("backend", "unknown backend %q: use \"local\" or \"s3\"", d.Backend)
	}
}

// validateOutputs checks what is published: globs, transforms and links.
func (d Destination) validateOutputs(e *destErrs) {
	for j, g := range d.Publish.Include {
		if !doublestar.ValidatePattern(g) {
			e.add("publish.include["+strconv.Itoa(j)+"]", "publish.include %q is not a valid glob (check brackets and braces)", g)
		}
	}
	for j, g := range d.Publish.Exclude {
		if !doublestar.ValidatePattern(g) {
			e.add("publish.exclude["+strconv.Itoa(j)+"]", "publish.exclude %q is not a valid glob (check brackets and braces)", g)
		}
	}
	for j, t := range d.Transforms {
		t.validate(e, "transforms["+strconv.Itoa(j)+"]")
	}
	if d.Links.BaseURL != "" {
		if msg := checkBaseURL(d.Links.BaseURL); msg != "" {
			e.add("links.base_url", "links.base_url %q %s", d.Links.BaseURL, msg)
		}
	}
}

func (t Transform) validate(e *destErrs, tk string) {
	switch t.Name {
	case MarkdownToHTML:
	case "":
		e.add(tk+".name", "%s.name is missing: use %q", tk, MarkdownToHTML)
		return
	default:
		e.add(tk+".name", "%s: unknown transform %q: use %q", tk, t.Name, MarkdownToHTML)
		return
	}
	if t.Match == "" || !doublestar.ValidatePattern(t.Match) {
		e.add(tk+".match", "%s.match %q is not a valid glob, e.g. %q", tk, t.Match, DefaultMarkdownMatch)
		return
	}
	if t.Index != "" {
		if err := catalog.ValidatePath(t.Index); err != nil {
			e.add(tk+".index", "%s.index: %v", tk, err)
		} else if ok, _ := doublestar.Match(t.Match, t.Index); !ok {
			e.add(tk+".index", "%s.index %q does not match %s.match %q, so it would never be rendered", tk, t.Index, tk, t.Match)
		}
	}
}

// checkID allows letters, digits, '.', '_' and '-'.
func checkID(id string) string {
	for _, r := range id {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '.' || r == '_' || r == '-') {
			return fmt.Sprintf("has %q: ids may use only letters, digits, '.', '_' and '-'", r)
		}
	}
	return ""
}

// checkSubjectPrefix: the prefix also names streams and KV buckets, which
// allow only letters, digits, '_' and '-'.
func checkSubjectPrefix(s string) string {
	if s == "" {
		return "is empty: use letters, digits, '_' or '-', e.g. \"distributor\""
	}
	for _, r := range s {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '_' || r == '-') {
			return fmt.Sprintf("has %q: use only letters, digits, '_' and '-' (it also names streams and buckets)", r)
		}
	}
	return ""
}

func validPort(p string) bool {
	n, err := strconv.Atoi(p)
	return err == nil && n >= 0 && n <= 65535
}

// authMethods lists the client credentials set, in key order.
func authMethods(n NATS) []string {
	var set []string
	for _, m := range []struct {
		key string
		on  bool
	}{{"nats.creds", n.CredsFile != ""}, {"nats.nkey_seed", n.NKeySeedFile != ""}, {"nats.token", n.Token != ""}, {"nats.user", n.User != ""}} {
		if m.on {
			set = append(set, m.key)
		}
	}
	return set
}

// checkAuth refuses more than one kind of credential: a server checks only
// one of them, and the embedded server could not enforce them all.
func checkAuth(n NATS) string {
	if set := authMethods(n); len(set) > 1 {
		return fmt.Sprintf("%s and %s are both set: use only one of nats.creds, nats.nkey_seed, nats.token or nats.user/password", set[0], set[1])
	}
	return ""
}

// authKey locates checkAuth's problem at the second credential's key.
func authKey(n NATS) string {
	if set := authMethods(n); len(set) > 1 {
		return set[1]
	}
	return "nats"
}

// RedactURL hides the user information (token, user and password) of each
// comma-separated server URL, for messages and logs.
func RedactURL(s string) string {
	parts := strings.Split(s, ",")
	for i, part := range parts {
		scheme, rest, ok := strings.Cut(part, "://")
		if !ok {
			scheme, rest = "", part
		}
		host := rest
		if j := strings.IndexAny(rest, "/?#"); j >= 0 {
			host = rest[:j]
		}
		at := strings.LastIndex(host, "@")
		if at < 0 {
			continue
		}
		if ok {
			scheme += "://"
		}
		parts[i] = scheme + "REDACTED" + rest[at:]
	}
	return strings.Join(parts, ",")
}

// checkNATSURL checks each comma-separated server URL.
func checkNATSURL(s string) string {
	for _, part := range strings.Split(s, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			return "has an empty server entry"
		}
		if !strings.Contains(part, "://") {
			if _, port, err := net.SplitHostPort(part); err != nil || !validPort(port) {
				return fmt.Sprintf("server %q must be a URL like nats://host:4222", RedactURL(part))
			}
			continue
		}
		u, err := url.Parse(part)
		if err != nil || u.Host == "" {
			return fmt.Sprintf("server %q must be a URL like nats://host:4222", RedactURL(part))
		}
		switch u.Scheme {
		case "nats", "tls", "ws", "wss":
		default:
			return fmt.Sprintf("server %q has scheme %q: use nats://, tls://, ws:// or wss://", RedactURL(part), u.Scheme)
		}
	}
	return ""
}

func checkEndpoint(s string) string {
	u, err := url.Parse(s)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return "must be an http(s) URL like https://s3.example.com"
	}
	return ""
}

func checkBaseURL(s string) string {
	u, err := url.Parse(s)
	switch {
	case err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "":
		return "must be an absolute http(s) URL like \"https://reports.example.com/weather/\""
	case u.RawQuery != "" || u.Fragment != "" || strings.HasSuffix(s, "?") || strings.HasSuffix(s, "#"):
		return "must not have a query or fragment: output paths are appended to it"
	case !strings.HasSuffix(u.Path, "/") && u.Path != "":
		return "must end in \"/\""
	case u.Path == "" && !strings.HasSuffix(s, "/"):
		return "must end in \"/\""
	}
	return ""
}

// checkS3Prefix: "" (bucket root) or a relative key prefix ending in "/".
func checkS3Prefix(p string) string {
	switch {
	case p == "":
		return ""
	case strings.HasPrefix(p, "/"):
		return "must not start with \"/\": it is a key prefix inside the bucket (\"\" = bucket root)"
	case !strings.HasSuffix(p, "/"):
		return "must end in \"/\""
	}
	if err := catalog.ValidateOutputPath(strings.TrimSuffix(p, "/")); err != nil {
		return "is not a clean key prefix: " + err.Error()
	}
	return ""
}

// expand substitutes {name} placeholders in tmpl.
func expand(tmpl string, vals map[string]string) (string, error) {
	var b strings.Builder
	for s := tmpl; s != ""; {
		i := strings.IndexAny(s, "{}")
		if i < 0 {
			b.WriteString(s)
			break
		}
		b.WriteString(s[:i])
		if s[i] == '}' {
			return "", fmt.Errorf("has an unmatched \"}\"")
		}
		j := strings.IndexByte(s[i:], '}')
		if j < 0 {
			return "", fmt.Errorf("has an unclosed \"{\"")
		}
		name := s[i+1 : i+j]
		v, ok := vals[name]
		if !ok {
			return "", fmt.Errorf("unknown placeholder {%s}: use {source_id}, {source_name} or {pipeline_id}", name)
		}
		b.WriteString(v)
		s = s[i+j+1:]
	}
	return b.String(), nil
}

// checkPrefix: "" or a relative, non-reserved path prefix (a trailing "/"
// is added by normalisePrefix).
func checkPrefix(p string) error {
	if p == "" {
		return nil
	}
	return catalog.ValidateOutputPath(strings.TrimSuffix(p, "/"))
}

func normalisePrefix(p string) string {
	if p != "" && !strings.HasSuffix(p, "/") {
		return p + "/"
	}
	return p
}

func checkLayout(tmpl string) string {
	sample := map[string]string{"source_id": "producer.name", "source_name": "name", "pipeline_id": "pipeline.id"}
	p, err := expand(tmpl, sample)
	if err != nil {
		return err.Error()
	}
	if strings.HasPrefix(p, "/") {
		return "must not start with \"/\": it is relative to the destination root (\"\" = the root itself)"
	}
	if err := checkPrefix(p); err != nil {
		return "is not a relative folder prefix: " + err.Error()
	}
	return ""
}

// RootKey is the canonical identity of the destination's root: local
// "file://" + absolute clean path + "/", s3 "s3://" + bucket + "/" + prefix.
// Destinations with the same root have the same key (and share one lease).
func (d Destination) RootKey() string {
	switch d.Backend {
	case BackendLocal:
		return fileKey(localPath(d.Path))
	case BackendS3:
		return "s3://" + d.Bucket + "/" + normalisePrefix(d.Path)
	}
	return d.Backend + "://" + d.Path
}

// fileKey is the root key of an absolute, clean local path.
func fileKey(p string) string {
	p = filepath.ToSlash(p)
	if !strings.HasSuffix(p, "/") {
		p += "/"
	}
	return "file://" + p
}

// Prefix expands the layout prefix for one source: "" (outputs at the root)
// or a valid relative folder prefix ending in "/". {source_name} is the last
// '.'-separated part of the source id.
func (d Destination) Prefix(sourceID, pipelineID string) (string, error) {
	name := sourceID[strings.LastIndexByte(sourceID, '.')+1:]
	p, err := expand(d.Layout.Prefix, map[string]string{"source_id": sourceID, "source_name": name, "pipeline_id": pipelineID})
	if err != nil {
		return "", fmt.Errorf("layout.prefix %q: %w", d.Layout.Prefix, err)
	}
	if err := checkPrefix(p); err != nil {
		return "", fmt.Errorf("layout.prefix %q gives %q for source %q: %w", d.Layout.Prefix, p, sourceID, err)
	}
	return normalisePrefix(p), nil
}

// CheckHTTPListen returns what is wrong with an http.listen value, or ""
// ("" itself stands for the default).
func CheckHTTPListen(s string) string {
	if s == HTTPOff || s == "" {
		return ""
	}
	if _, port, err := net.SplitHostPort(s); err != nil || !validPort(port) {
		return fmt.Sprintf("must be host:port, e.g. %q, or %q", DefaultHTTPListen, HTTPOff)
	}
	return ""
}
