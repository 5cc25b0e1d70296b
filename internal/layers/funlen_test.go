package layers

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// maxFuncLines is the most lines a non-test function may take, from its
// func keyword to its closing brace.
const maxFuncLines = 80

// longFuncs lists the functions of src (one file, named name) longer than
// maxFuncLines, one line each.
func longFuncs(fset *token.FileSet, name string, src any) ([]string, error) {
	f, err := parser.ParseFile(fset, name, src, parser.SkipObjectResolution)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, d := range f.Decls {
		fd, ok := d.(*ast.FuncDecl)
		if !ok || fd.Body == nil {
			continue
		}
		start, end := fset.Position(fd.Pos()), fset.Position(fd.End())
		if n := end.Line - start.Line + 1; n > maxFuncLines {
			out = append(out, fmt.Sprintf("%s:%d: %s is %d lines, more than %d: split it", name, start.Line, fd.Name.Name, n, maxFuncLines))
		}
	}
	return out, nil
}

// No non-test function of the module is longer than maxFuncLines.
func TestNoLongFunctions(t *testing.T) {
	out, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}").Output()
	if err != nil {
		t.Fatalf("go list -m: %v", err)
	}
	root := strings.TrimSpace(string(out))
	fset := token.NewFileSet()
	files := 0
	err = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if p != root && (d.Name() == "testdata" || strings.HasPrefix(d.Name(), ".") || strings.HasPrefix(d.Name(), "_")) {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(p, ".go") || strings.HasSuffix(p, "_test.go") {
			return nil
		}
		src, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		long, err := longFuncs(fset, filepath.ToSlash(rel), src)
		if err != nil {
			return err
		}
		files++
		for _, l := range long {
			t.Error(l)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if files == 0 {
		t.Fatal("found no Go files in the module")
	}
}

// longFuncs counts a function from its func keyword to its closing brace.
func TestLongFuncs(t *testing.T) {
	body := func(lines int) string {
		return "func f() {\n" + strings.Repeat("\t_ = 0\n", lines-2) + "}\n"
	}
	for _, tt := range []struct {
		lines int
		want  int
	}{{maxFuncLines, 0}, {maxFuncLines + 1, 1}} {
		got, err := longFuncs(token.NewFileSet(), "x.go", "package x\n"+body(tt.lines))
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != tt.want {
			t.Errorf("a %d-line function: %q, want %d finding(s)", tt.lines, got, tt.want)
		}
	}
}
