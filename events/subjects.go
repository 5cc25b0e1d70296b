package events

import (
	"fmt"
	"strings"
	"unicode"
)

// DefaultPrefix is the subject prefix when none is configured.
const DefaultPrefix = "distributor"

// Subjects names every subject, stream, bucket and consumer under one prefix
// (one prefix per tenant). The zero value uses DefaultPrefix.
//
//	<prefix>.bundle.ready.<pipeline_id>        producers
//	<prefix>.admin.bundle.ready.<pipeline_id>  operators (may adopt or roll back)
//	<prefix>.events.<type>.<destination_id or _>.<pipeline_id>
//
// Pipeline ids may contain dots, so they come last.
type Subjects struct {
	Prefix string
}

// NewSubjects validates prefix ("" means DefaultPrefix).
func NewSubjects(prefix string) (Subjects, error) {
	s := Subjects{Prefix: prefix}
	return s, s.Validate()
}

// Validate checks the prefix: one subject token of letters, digits, '_' or
// '-' (it also names streams and a bucket, which allow nothing else).
func (s Subjects) Validate() error {
	p := s.prefix()
	for _, c := range p {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-') {
			return fmt.Errorf("nats.subject_prefix %q: use only letters, digits, '_' and '-'", p)
		}
	}
	return nil
}

func (s Subjects) prefix() string {
	if s.Prefix == "" {
		return DefaultPrefix
	}
	return s.Prefix
}

// upper is the prefix as stream and bucket names start: upper-cased, '-'
// becoming '_'. That folding loses a letter's case and which separator
// was written, so a prefix with a capital or a '_' gets '-' and a hex code
// of those bits: one bit per letter and separator, in order, 1 for a
// capital or a '_' ("Acme" → "ACME-8", "t_1" → "T_1-4"). A lowercase
// prefix with only '-' keeps the plain name, and no two prefixes share
// their names: the plain names have no '-', and the code gives back
// exactly what the folding lost.
func (s Subjects) upper() string {
	p := s.prefix()
	folded := strings.ToUpper(strings.ReplaceAll(p, "-", "_"))
	var bits []bool
	lost := false
	for _, c := range p {
		if c >= '0' && c <= '9' {
			continue
		}
		bit := c == '_' || c >= 'A' && c <= 'Z'
		bits = append(bits, bit)
		lost = lost || bit
	}
	if !lost {
		return folded
	}
	var code strings.Builder
	for i := 0; i < len(bits); i += 4 {
		nibble := 0
		for j := range 4 {
			nibble <<= 1
			if i+j < len(bits) && bits[i+j] {
				nibble |= 1
			}
		}
		code.WriteByte("0123456789ABCDEF"[nibble])
	}
	return folded + "-" + code.String()
}

// BundleReady is the subject of a pipeline's bundle-ready events.
func (s Subjects) BundleReady(pipelineID string) string {
	return s.prefix() + ".bundle.ready." + pipelineID
}

// BundleReadyFilter matches one pipeline's bundle-ready events, or all of
// them when pipelineID is "".
func (s Subjects) BundleReadyFilter(pipelineID string) string {
	if pipelineID == "" {
		pipelineID = ">"
	}
	return s.BundleReady(pipelineID)
}

// AdminBundleReady is the subject of an operator's bundle-ready requests
// for a pipeline. Only events on it may carry operator flags
// (take_ownership, allow_older), so NATS permissions that keep producers
// off it keep them from adopting unmanaged content.
func (s Subjects) AdminBundleReady(pipelineID string) string {
	return s.prefix() + ".admin.bundle.ready." + pipelineID
}

// AdminBundleReadyFilter matches one pipeline's operator requests, or all
// of them when pipelineID is "".
func (s Subjects) AdminBundleReadyFilter(pipelineID string) string {
	if pipelineID == "" {
		pipelineID = ">"
	}
	return s.AdminBundleReady(pipelineID)
}

// IsAdmin reports whether subject is an operator's bundle-ready subject.
func (s Subjects) IsAdmin(subject string) bool {
	return strings.HasPrefix(subject, s.AdminBundleReady(""))
}

// BundleReadyPipeline returns the pipeline id a bundle-ready subject ends
// in, producer or admin (BundleReady, AdminBundleReady), and false for any
// other subject.
func (s Subjects) BundleReadyPipeline(subject string) (string, bool) {
	for _, prefix := range []string{s.AdminBundleReady(""), s.BundleReady("")} {
		if id, ok := strings.CutPrefix(subject, prefix); ok && id != "" {
			return id, true
		}
	}
	return "", false
}

// Result is the subject of a result event. An empty destination or
// pipeline id becomes "_".
func (s Subjects) Result(typ, destinationID, pipelineID string) string {
	return s.prefix() + ".events." + typ + "." + orUnderscore(destinationID) + "." + orUnderscore(pipelineID)
}

// ResultFilter matches result events; "" matches any type, destination or
// pipeline. The pipeline comes last and may contain dots, hence ">".
func (s Subjects) ResultFilter(typ, destinationID, pipelineID string) string {
	if typ == "" {
		typ = "*"
	}
	if destinationID == "" {
		destinationID = "*"
	}
	if pipelineID == "" {
		pipelineID = ">"
	}
	return s.prefix() + ".events." + typ + "." + destinationID + "." + pipelineID
}

// BundlesStream is the stream of bundle-ready events ("DISTRIBUTOR_BUNDLES").
func (s Subjects) BundlesStream() string { return s.upper() + "_BUNDLES" }

// EventsStream is the stream of result events ("DISTRIBUTOR_EVENTS").
func (s Subjects) EventsStream() string { return s.upper() + "_EVENTS" }

// LeaseBucket is the key-value bucket of root leases ("DISTRIBUTOR_LEASES").
func (s Subjects) LeaseBucket() string { return s.upper() + "_LEASES" }

// Durable is the pull consumer every serve process shares ("distributor-publisher").
func (s Subjects) Durable() string { return s.prefix() + "-publisher" }

func orUnderscore(id string) string {
	if id == "" {
		return "_"
	}
	return id
}

// ValidatePipelineID checks that id can be the last part of a subject: not
// empty, no whitespace or control characters, no '*' or '>', and dots only
// between non-empty parts ("weatherreporter.daily").
func ValidatePipelineID(id string) error {
	if err := validateToken("pipeline id", id); err != nil {
		return err
	}
	for _, part := range strings.Split(id, ".") {
		if part == "" {
			return fmt.Errorf("pipeline id %q has an empty part between dots", id)
		}
	}
	return nil
}

// ValidateDestinationID checks that id is one subject token: like a
// pipeline id but without dots (it sits in the middle of result subjects).
func ValidateDestinationID(id string) error {
	if err := validateToken("destination id", id); err != nil {
		return err
	}
	if strings.Contains(id, ".") {
		return fmt.Errorf("destination id %q contains '.': use '-' or '_'", id)
	}
	return nil
}

func validateToken(what, id string) error {
	if id == "" {
		return fmt.Errorf("%s is empty", what)
	}
	if id == "_" {
		return fmt.Errorf("%s \"_\" is reserved (it stands for none in subjects)", what)
	}
	for _, c := range id {
		if unicode.IsSpace(c) || unicode.IsControl(c) || c == '*' || c == '>' || c == unicode.ReplacementChar {
			return fmt.Errorf("%s %q contains %q: use letters, digits, '-', '_' and '.'", what, id, c)
		}
	}
	return nil
}
