package catalog_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/distributor/distributor/catalog"
)

func TestValidatePath(t *testing.T) {
	t.Parallel()
	valid := []string{
		"a", "report.md", "tomorrow/index.html", "a/b/c/d.txt", ".hidden", "a/.hidden/b",
		"...", "a..b", "..a", "a.", "with space", "ünïcødé/日本語.md", "emoji😀", "<b>&amp;",
		strings.Repeat("a", catalog.MaxPathLen),
		".distributor.json", ".distributor/lock", // ValidatePath alone knows nothing of reserved names
	}
	for _, p := range valid {
		if err := catalog.ValidatePath(p); err != nil {
			t.Errorf("ValidatePath(%q) = %v, want nil", p, err)
		}
	}
	invalid := map[string]string{
		"":            "empty",
		"/abs":        "absolute",
		"/":           "absolute",
		"..":          `".." segment`,
		"../x":        `".." segment`,
		"a/..":        `".." segment`,
		".":           `"." segment`,
		"./a":         `"." segment`,
		"a//b":        "empty segment",
		"a/":          "empty segment",
		`a\b`:         `'\'`,
		`..\x`:        `'\'`,
		"a\x00":       "control",
		"a\nb":        "control",
		"a\tb":        "control",
		"\x1f":        "control",
		"a\x7f":       "control",
		"a\u0080":     "control",
		"a\u009f":     "control",
		"bad\xffutf8": "UTF-8",
		strings.Repeat("a", catalog.MaxPathLen+1):   "longer than 1024 bytes",
		strings.Repeat("ü", catalog.MaxPathLen/2+1): "longer than 1024 bytes", // bytes, not runes
	}
	for p, want := range invalid {
		err := catalog.ValidatePath(p)
		if !errors.Is(err, catalog.ErrBadPath) || !strings.Contains(err.Error(), want) {
			t.Errorf("ValidatePath(%q) = %v, want ErrBadPath saying %q", p, err, want)
		}
	}
}

func TestIsReserved(t *testing.T) {
	t.Parallel()
	reserved := []string{
		".distributor.json", ".distributor", ".distributor/", ".distributor/lock", ".distributor/a/b",
		".distributor.json/x", ".DISTRIBUTOR.JSON", ".Distributor/intent",
	}
	for _, p := range reserved {
		if !catalog.IsReserved(p) {
			t.Errorf("IsReserved(%q) = false, want true", p)
		}
	}
	free := []string{
		"", "distributor.json", ".distributor.json.bak", ".distributorx", ".distributor-old/x",
		"a/.distributor.json", "a/.distributor/lock", "x.distributor.json",
	}
	for _, p := range free {
		if catalog.IsReserved(p) {
			t.Errorf("IsReserved(%q) = true, want false", p)
		}
	}
}

func TestValidateOutputPath(t *testing.T) {
	t.Parallel()
	if err := catalog.ValidateOutputPath("a/.distributor.json"); err != nil {
		t.Fatalf("a nested .distributor.json is an ordinary output: %v", err)
	}
	for _, p := range []string{".distributor.json", ".distributor/x", "../x"} {
		if err := catalog.ValidateOutputPath(p); !errors.Is(err, catalog.ErrBadPath) {
			t.Errorf("ValidateOutputPath(%q) = %v, want ErrBadPath", p, err)
		}
	}
	err := catalog.ValidateOutputPath(".distributor/x")
	if !strings.Contains(err.Error(), "reserved for distributor's own state") {
		t.Fatalf("error %q should say why the path is refused", err)
	}
}
