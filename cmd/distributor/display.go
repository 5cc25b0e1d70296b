package main

// Terminal display: progress bars, shortened change lists, and roots shown
// as the configuration file writes them. Scripts read --json instead; none
// of this reaches a pipe or a file.

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/schollz/progressbar/v3"
	"go.yaml.in/yaml/v3"

	"github.com/distributor/distributor/config"
	"github.com/distributor/distributor/progress"
)

// tty reports whether w is a terminal (a.terminal overrides it in tests).
func (a *app) tty(w io.Writer) bool {
	if a.terminal != nil {
		return a.terminal(w)
	}
	return isTerminal(w)
}

func (a *app) stdoutIsTerminal() bool { return a.tty(a.stdout) }

// withProgress returns ctx drawing a progress bar labelled label on stderr,
// and the function that clears it. Nothing is drawn unless both stdout and
// stderr are terminals and --quiet is off.
func (a *app) withProgress(ctx context.Context, label string) (context.Context, func()) {
	if !a.drawsProgress() {
		return ctx, func() {}
	}
	b := &progressBar{w: a.stderr, label: label}
	return progress.With(ctx, b), b.finish
}

// drawsProgress reports whether withProgress draws anything.
func (a *app) drawsProgress() bool {
	return !a.quiet && a.tty(a.stdout) && a.tty(a.stderr)
}

// withDestinationProgress is withProgress labelled with d's id.
func (a *app) withDestinationProgress(ctx context.Context, d config.Destination) (context.Context, func()) {
	return a.withProgress(ctx, d.ID)
}

// progressBar draws one bar per phase: bytes (with rate and ETA) on the
// bar, files in the description.
type progressBar struct {
	mu           sync.Mutex
	w            io.Writer
	label, phase string
	files, total int64
	described    time.Time
	bar          *progressbar.ProgressBar
}

func (p *progressBar) Start(phase string, files, bytes int64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.finishLocked()
	if files == 0 {
		return
	}
	p.phase, p.files, p.total = phase, 0, files
	if bytes <= 0 {
		bytes = -1 // a spinner: the size is not known (or all files are empty)
	}
	p.bar = progressbar.NewOptions64(bytes,
		progressbar.OptionSetWriter(p.w),
		progressbar.OptionSetDescription(p.describe()),
		progressbar.OptionShowBytes(true),
		progressbar.OptionSetWidth(30),
		progressbar.OptionSetPredictTime(true),
		progressbar.OptionThrottle(100*time.Millisecond),
		progressbar.OptionClearOnFinish(),
	)
}

func (p *progressBar) Add(files, bytes int64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.bar == nil {
		return
	}
	p.files += files

	// The description is redrawn at most ten times a second.
	if now := time.Now(); now.Sub(p.described) >= 100*time.Millisecond || p.files == p.total {
		p.described = now
		p.bar.Describe(p.describe())
	}
	_ = p.bar.Add64(bytes) // drawing errors are not the command's
}

func (p *progressBar) describe() string {
	if p.total < 0 {
		return fmt.Sprintf("%s: %s %d files", p.label, p.phase, p.files)
	}
	return fmt.Sprintf("%s: %s %d/%d files", p.label, p.phase, p.files, p.total)
}

func (p *progressBar) finish() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.finishLocked()
}

func (p *progressBar) finishLocked() {
	if p.bar != nil {
		_ = p.bar.Finish()
		p.bar = nil
	}
}

// rootsAsWritten maps local roots (absolute, clean) to the relative path
// the configuration file gives them, e.g. "site/latest". Roots written as
// absolute paths, and S3 roots, are shown as they are.
func rootsAsWritten(path string, cfg *config.Config) map[string]string {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil
	}
	var raw struct {
		Destinations []struct {
			ID   string `yaml:"id"`
			Path string `yaml:"path"`
		} `yaml:"destinations"`
	}
	if yaml.Unmarshal(data, &raw) != nil {
		return nil // config.Load reported anything that matters
	}
	out := map[string]string{}
	for _, w := range raw.Destinations {
		d, ok := cfg.Destination(w.ID)
		if !ok || d.Backend != config.BackendLocal || w.Path == "" || filepath.IsAbs(w.Path) || d.Path == "" {
			continue
		}
		out[filepath.Clean(d.Path)] = w.Path
	}
	return out
}

// rootAsWritten is root as the configuration writes it, or "" when that
// is root itself. root is a backend's String() or a root key (file://…).
func (a *app) rootAsWritten(root string) string {
	if len(a.written) == 0 {
		return ""
	}
	return a.written[filepath.Clean(strings.TrimPrefix(root, "file://"))]
}

// showRoot is root for people: as written when the configuration gives it
// relative to its own folder.
func (a *app) showRoot(root string) string {
	if w := a.rootAsWritten(root); w != "" {
		return w
	}
	return root
}

// showRootsIn rewrites the configured roots in an error line as written.
func (a *app) showRootsIn(msg string) string {
	for abs, w := range a.written {
		// A root key (file:///abs/) is an identity, not a path to show:
		// it stays whole.
		key := "file://" + abs
		parts := strings.Split(msg, key)
		for i := range parts {
			parts[i] = strings.ReplaceAll(parts[i], abs, w)
		}
		msg = strings.Join(parts, key)
	}
	return msg
}

// escapeControl renders the control characters of s (C0, DEL, C1) and
// bytes that are not UTF-8 visibly, as Go escapes (\x1b, \n, \u009b,
// \xff): ids, paths, locations and messages come from producers' events
// and from catalogs, and must not drive the operator's terminal. Anything
// else, a backslash too, stays as it is, so the result is s whenever s
// holds nothing to escape, and escaping it again changes nothing.
func escapeControl(s string) string {
	clean := true
	for _, c := range s {
		if unicode.IsControl(c) || c == utf8.RuneError {
			clean = false
			break
		}
	}
	if clean {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); {
		c, n := utf8.DecodeRuneInString(s[i:])
		switch {
		case c == utf8.RuneError && n == 1:
			fmt.Fprintf(&b, `\x%02x`, s[i])
		case unicode.IsControl(c):
			q := strconv.QuoteRune(c) // '\x1b', '\n', '\u009b'
			b.WriteString(q[1 : len(q)-1])
		default:
			b.WriteString(s[i : i+n])
		}
		i += n
	}
	return b.String()
}
