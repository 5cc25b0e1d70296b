package main

import (
	"bufio"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// TestDocumentedCommandsParse: every distributor command line in a shell
// block of the README, CONTRIBUTING.md and docs/ names a command that
// exists, with flags that command takes. The lines are parsed by the real
// command tree; nothing runs.
func TestDocumentedCommandsParse(t *testing.T) {
	files, err := filepath.Glob("../../docs/*.md")
	if err != nil {
		t.Fatal(err)
	}
	files = append(files, "../../README.md", "../../CONTRIBUTING.md")
	n := 0
	for _, f := range files {
		for _, c := range documentedCommands(t, f) {
			root := newApp(io.Discard, io.Discard).rootCommand()
			cmd, rest, err := root.Find(c.args)
			if err != nil || cmd == root || !cmd.Runnable() {
				t.Errorf("%s:%d: %q: no such command (%v)", c.file, c.line, strings.Join(c.args, " "), err)
				continue
			}
			if err := cmd.ParseFlags(rest); err != nil {
				t.Errorf("%s:%d: %q: %v", c.file, c.line, strings.Join(c.args, " "), err)
			}
			n++
		}
	}
	t.Logf("%d documented command lines parse", n)
	if n < 30 {
		t.Fatalf("found %d documented distributor command lines, want at least 30: is the parser still finding them?", n)
	}
}

// documentedCommand is one distributor invocation in a shell block.
type documentedCommand struct {
	file string
	line int
	args []string // after the program name
}

// documentedCommands finds the distributor invocations in the ```sh
// blocks of a Markdown file: a word that is `distributor` or ends in
// `/distributor` (a path, `go run ./cmd/distributor`, a container's
// `distributor-1 distributor …`; not a `go build -o` target) starts one,
// and it runs to the end of its
// command (`;`, `&&`, `||`, `|`, `&`, a comment).
func documentedCommands(t *testing.T, file string) []documentedCommand {
	t.Helper()
	fh, err := os.Open(file)
	if err != nil {
		t.Fatal(err)
	}
	defer fh.Close()
	var out []documentedCommand
	in, start, joined := false, 0, ""
	sc := bufio.NewScanner(fh)
	for i := 1; sc.Scan(); i++ {
		line := sc.Text()
		trimmed := strings.TrimSpace(line)
		switch {
		case strings.HasPrefix(trimmed, "```"):
			in = !in && (trimmed == "```sh" || trimmed == "```bash" || trimmed == "```console")
			continue
		case !in:
			continue
		}
		if joined == "" {
			start = i
		}
		if strings.HasSuffix(line, "\\") {
			joined += strings.TrimSuffix(line, "\\") + " "
			continue
		}
		joined += line
		for _, words := range shellCommandsIn(joined) {
			for j, w := range words {
				if (w == "distributor" || strings.HasSuffix(w, "/distributor")) && (j == 0 || words[j-1] != "-o") {
					// A subcommand follows (`distributor --version` has none).
					if j+1 < len(words) && (!strings.HasPrefix(words[j+1], "-") || words[j+1] == "--config") {
						out = append(out, documentedCommand{file: filepath.Base(file), line: start, args: words[j+1:]})
					}
					break
				}
			}
		}
		joined = ""
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// shellCommandsIn splits a shell line into commands and those into words:
// quotes are removed, variables left as written, a `#` that starts a word
// ends the line, and `;`, `&&`, `||`, `|` and `&` end a command.
func shellCommandsIn(line string) [][]string {
	var cmds [][]string
	var words []string
	var w strings.Builder
	inWord := false
	endWord := func() {
		if inWord {
			words = append(words, w.String())
			w.Reset()
			inWord = false
		}
	}
	endCmd := func() {
		endWord()
		if len(words) > 0 {
			cmds = append(cmds, words)
		}
		words = nil
	}
	for i := 0; i < len(line); i++ {
		c := line[i]
		switch {
		case c == '\'' || c == '"':
			end := strings.IndexByte(line[i+1:], c)
			if end < 0 {
				end = len(line) - i - 1
			}
			w.WriteString(line[i+1 : i+1+end])
			inWord = true
			i += end + 1
		case c == ' ' || c == '\t':
			endWord()
		case c == '#' && !inWord:
			endCmd()
			return cmds
		case c == ';' || c == '|' || c == '&':
			endCmd()
		default:
			w.WriteByte(c)
			inWord = true
		}
	}
	endCmd()
	return cmds
}

// TestEveryFlagDocumented: docs/cli.md's "Commands" section has a heading
// for every command ("### `catalog show`", and "### Every command" for
// the flags all commands take) whose text names each of its flags as
// `--flag`; a flag added to a command without a line there fails here.
func TestEveryFlagDocumented(t *testing.T) {
	data, err := os.ReadFile("../../docs/cli.md")
	if err != nil {
		t.Fatal(err)
	}
	sections := commandSections(string(data))
	root := newApp(io.Discard, io.Discard).rootCommand()
	checked := 0
	check := func(heading string, flags *pflag.FlagSet) {
		text, ok := sections[heading]
		if !ok {
			t.Errorf("docs/cli.md: no heading ### %s under ## Commands", heading)
			return
		}
		flags.VisitAll(func(f *pflag.Flag) {
			if f.Hidden || f.Name == "help" || f.Name == "version" {
				return
			}
			checked++
			if !regexp.MustCompile("`--" + regexp.QuoteMeta(f.Name) + "[ `=]").MatchString(text) {
				t.Errorf("docs/cli.md: ### %s does not document `--%s` (%s)", heading, f.Name, f.Usage)
			}
		})
	}
	check("Every command", root.PersistentFlags())
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		if c.Runnable() && !c.Hidden && c != root {
			check("`"+strings.TrimPrefix(c.CommandPath(), root.Name()+" ")+"`", c.LocalFlags())
		}
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(root)
	if checked < 80 {
		t.Fatalf("checked %d flags, want at least 80: is the command tree still walked?", checked)
	}
}

// commandSections maps each ### heading under "## Commands" of a Markdown
// text to the text up to the next heading.
func commandSections(md string) map[string]string {
	out := map[string]string{}
	in, heading := false, ""
	for line := range strings.SplitSeq(md, "\n") {
		switch {
		case strings.HasPrefix(line, "## "):
			in, heading = line == "## Commands", ""
		case in && strings.HasPrefix(line, "### "):
			heading = strings.TrimPrefix(line, "### ")
			out[heading] = ""
		case in && heading != "":
			out[heading] += line + "\n"
		}
	}
	return out
}
