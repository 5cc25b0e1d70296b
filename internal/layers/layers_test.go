package layers

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"slices"
	"strings"
	"testing"
)

const module = "github.com/distributor/distributor"

// pkg is the part of `go list -json` the rules read.
type pkg struct {
	ImportPath   string
	Standard     bool
	Imports      []string // direct imports of the non-test files
	Deps         []string // every package the non-test files depend on
	TestImports  []string
	XTestImports []string
}

// storageBackends may not depend on any of forbiddenForBackends.
var (
	storageBackends      = []string{"storage/local", "storage/s3"}
	forbiddenForBackends = []string{"engine", "consumer", "planner", "lease", "events", "config"}
	// plannerMayImport is all the project a pure planner may import.
	plannerMayImport = []string{"catalog"}
	// engineMayNotImport: the engine runs one publication on one root under
	// a lease it is handed; messaging, results and queues are the
	// service's and the consumer's.
	engineMayNotImport        = []string{"events", "consumer", "service", "config", "transform"}
	engineMayNotImportOutside = []string{"github.com/nats-io"}

	// onlyAboveEngine is the one package above the engine: every other
	// package reaches it through the service (their tests may import it).
	onlyAboveEngine = "service"
)

// isTestSupport reports whether r is a test-support package (harnesses,
// contract suites, fakes) or the benchmark tool that runs on them: only
// tests and other test support import them.
func isTestSupport(r string) bool {
	for _, root := range []string{"testenv", "storage/storagetest", "lease/leasetest", "bench"} {
		if r == root || strings.HasPrefix(r, root+"/") {
			return true
		}
	}
	return false
}

// rel is p relative to the module ("" for packages outside it).
func rel(p string) (string, bool) {
	if p == module {
		return ".", true
	}
	r, ok := strings.CutPrefix(p, module+"/")
	return r, ok
}

func isCmd(r string) bool { return r == "cmd" || strings.HasPrefix(r, "cmd/") }

// violations lists every broken layer rule, one line each. std reports
// whether an import path is in the standard library.
func violations(pkgs []pkg, std func(string) bool) []string {
	var out []string
	for _, p := range pkgs {
		name, ok := rel(p.ImportPath)
		if !ok {
			continue
		}
		if name == "planner" {
			for _, imp := range p.Imports {
				r, inModule := rel(imp)
				switch {
				case inModule && !slices.Contains(plannerMayImport, r):
					out = append(out, fmt.Sprintf("planner imports %s: the planner is pure and imports only catalog of this module", r))
				case !inModule && !std(imp):
					out = append(out, fmt.Sprintf("planner imports %s: the planner imports nothing outside the standard library", imp))
				}
			}
		}
		if name == "engine" {
			for _, imp := range p.Imports {
				r, inModule := rel(imp)
				if inModule && slices.Contains(engineMayNotImport, r) {
					out = append(out, fmt.Sprintf("engine imports %s: the engine runs one publication on a root and knows nothing of configuration, transforms, events or queues", r))
				}
				for _, o := range engineMayNotImportOutside {
					if !inModule && (imp == o || strings.HasPrefix(imp, o+"/")) {
						out = append(out, fmt.Sprintf("engine imports %s: the engine knows nothing of NATS", imp))
					}
				}
			}
		}
		for _, imp := range p.Imports {
			r, inModule := rel(imp)
			switch {
			case !inModule:
			case r == "engine" && name != onlyAboveEngine && !isTestSupport(name):
				out = append(out, fmt.Sprintf("%s imports engine: only %s imports the engine; go through the service", name, onlyAboveEngine))
			case isTestSupport(r) && !isTestSupport(name):
				out = append(out, fmt.Sprintf("%s imports %s: test-support packages are imported by tests only", name, r))
			}
		}
		for _, imp := range slices.Concat(p.Imports, p.TestImports, p.XTestImports) {
			if r, inModule := rel(imp); inModule && isCmd(r) && !isCmd(name) {
				out = append(out, fmt.Sprintf("%s imports %s: no package imports a command", name, r))
			}
		}
		if slices.Contains(storageBackends, name) {
			for _, dep := range p.Deps {
				if r, inModule := rel(dep); inModule && slices.Contains(forbiddenForBackends, r) {
					out = append(out, fmt.Sprintf("storage backend %s depends on %s: backends sit below the engine and know nothing of it", name, r))
				}
			}
		}
	}
	return out
}

// listModule runs `go list -json` over the whole module.
func listModule(t *testing.T) ([]pkg, map[string]bool) {
	t.Helper()
	cmd := exec.Command("go", "list", "-json", module+"/...")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, stderr.String())
	}
	var pkgs []pkg
	dec := json.NewDecoder(bytes.NewReader(out))
	for {
		var p pkg
		err := dec.Decode(&p)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("decode go list output: %v", err)
		}
		pkgs = append(pkgs, p)
	}
	// Standard-library membership of every import named above.
	cmd = exec.Command("go", "list", "-f", "{{.ImportPath}}", "std")
	out, err = cmd.Output()
	if err != nil {
		t.Fatalf("go list std: %v", err)
	}
	std := map[string]bool{}
	for _, line := range strings.Fields(string(out)) {
		std[line] = true
	}
	return pkgs, std
}

// The module as it stands keeps its layers.
func TestModuleKeepsItsLayers(t *testing.T) {
	pkgs, std := listModule(t)
	names := map[string]bool{}
	for _, p := range pkgs {
		if r, ok := rel(p.ImportPath); ok {
			names[r] = true
		}
	}
	// The rules name packages that must exist, or they guard nothing.
	for _, want := range slices.Concat([]string{"planner", "engine", onlyAboveEngine, "testenv", "storage/storagetest"}, storageBackends, forbiddenForBackends, plannerMayImport, engineMayNotImport) {
		if !names[want] {
			t.Errorf("package %s is not in the module: update the layer rules in this test", want)
		}
	}
	for _, v := range violations(pkgs, func(p string) bool { return std[p] }) {
		t.Error(v)
	}
}

// Each rule catches the import it forbids, and lets the allowed ones pass.
func TestViolations(t *testing.T) {
	std := func(p string) bool { return !strings.Contains(p, ".") }
	m := func(r string) string { return module + "/" + r }
	tests := []struct {
		name string
		pkgs []pkg
		want []string
	}{
		{
			name: "allowed",
			pkgs: []pkg{
				{ImportPath: m("planner"), Imports: []string{"errors", m("catalog")}},
				{ImportPath: m("storage/local"), Imports: []string{m("storage")}, Deps: []string{m("catalog"), m("storage"), "golang.org/x/sys/unix"}},
				{ImportPath: m("engine"), Imports: []string{m("planner"), m("lease")}},
				{ImportPath: m("service"), Imports: []string{m("engine")}},
				{ImportPath: m("cmd/distributor"), Imports: []string{m("service")}, TestImports: []string{m("engine"), m("testenv")}},
				{ImportPath: m("testenv/enginetest"), Imports: []string{m("engine"), m("testenv")}},
			},
		},
		{
			name: "a command imports the engine",
			pkgs: []pkg{{ImportPath: m("cmd/distributor"), Imports: []string{m("service"), m("engine")}}},
			want: []string{"cmd/distributor imports engine: only service imports the engine; go through the service"},
		},
		{
			name: "engine imports config and transform",
			pkgs: []pkg{{ImportPath: m("engine"), Imports: []string{m("config"), m("transform")}}},
			want: []string{"engine imports config: the engine runs one publication on a root and knows nothing of configuration, transforms, events or queues",
				"engine imports transform: the engine runs one publication on a root and knows nothing of configuration, transforms, events or queues"},
		},
		{
			name: "a production package imports a test harness",
			pkgs: []pkg{{ImportPath: m("service"), Imports: []string{m("testenv/enginetest")}}},
			want: []string{"service imports testenv/enginetest: test-support packages are imported by tests only"},
		},
		{
			name: "planner imports storage",
			pkgs: []pkg{{ImportPath: m("planner"), Imports: []string{m("catalog"), m("storage")}}},
			want: []string{"planner imports storage: the planner is pure and imports only catalog of this module"},
		},
		{
			name: "engine imports events and NATS",
			pkgs: []pkg{{ImportPath: m("engine"), Imports: []string{m("events"), "github.com/nats-io/nats.go/jetstream", m("lease")}}},
			want: []string{"engine imports events: the engine runs one publication on a root and knows nothing of configuration, transforms, events or queues",
				"engine imports github.com/nats-io/nats.go/jetstream: the engine knows nothing of NATS"},
		},
		{
			name: "planner imports a third-party package",
			pkgs: []pkg{{ImportPath: m("planner"), Imports: []string{"github.com/x/y"}}},
			want: []string{"planner imports github.com/x/y: the planner imports nothing outside the standard library"},
		},
		{
			name: "a test imports cmd",
			pkgs: []pkg{{ImportPath: m("engine"), XTestImports: []string{m("cmd/distributor")}}},
			want: []string{"engine imports cmd/distributor: no package imports a command"},
		},
		{
			name: "backend depends on lease through another package",
			pkgs: []pkg{{ImportPath: m("storage/s3"), Deps: []string{m("storage"), m("lease")}}},
			want: []string{"storage backend storage/s3 depends on lease: backends sit below the engine and know nothing of it"},
		},
		{
			name: "packages outside the module are not judged",
			pkgs: []pkg{{ImportPath: "example.com/planner", Imports: []string{"example.com/cmd/x"}}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := violations(tt.pkgs, std)
			if !slices.Equal(got, tt.want) {
				t.Errorf("violations = %q, want %q", got, tt.want)
			}
		})
	}
}
