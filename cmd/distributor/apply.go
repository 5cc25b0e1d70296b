package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/distributor/distributor/bundle"
	"github.com/distributor/distributor/catalog"
	"github.com/distributor/distributor/config"
	"github.com/distributor/distributor/events"
	"github.com/distributor/distributor/lease"
	"github.com/distributor/distributor/planner"
	"github.com/distributor/distributor/service"
)

// publishFlags are shared by plan and apply.
type publishFlags struct {
	pipeline      string
	bundle        string
	digest        string
	destinations  []string
	takeOwnership bool
	allowOlder    bool
}

func (f *publishFlags) register(cmd *cobra.Command) {
	cmd.Flags().StringVar(&f.pipeline, "pipeline", "", "pipeline id (from the configuration)")
	cmd.Flags().StringVar(&f.bundle, "bundle", "", "bundle location: a folder, file:///abs/path/ or s3://bucket/prefix/")
	cmd.Flags().StringVar(&f.digest, "digest", "", "expected manifest digest (sha256:…); default: not checked")
	cmd.Flags().StringSliceVar(&f.destinations, "destination", nil, "only these destinations of the pipeline (repeatable)")
}

func (f *publishFlags) request() (service.Request, error) {
	if err := requireFlag("pipeline", f.pipeline); err != nil {
		return service.Request{}, err
	}
	if err := requireFlag("bundle", f.bundle); err != nil {
		return service.Request{}, err
	}
	if f.digest != "" && !catalog.ValidDigest(f.digest) {
		return service.Request{}, usageErr("--digest %q: give the manifest digest as sha256:<64 lowercase hex> (bundle create prints it)", f.digest)
	}
	loc, err := absLocation(f.bundle)
	if err != nil {
		return service.Request{}, err
	}
	return service.Request{PipelineID: f.pipeline, Bundle: loc, ManifestDigest: f.digest,
		Destinations: f.destinations, TakeOwnership: f.takeOwnership, AllowOlder: f.allowOlder}, nil
}

// directLockTTL bounds how long a crashed direct-mode run blocks a root when
// its holder cannot be checked (another host). The lock is renewed while
// held. It is the longest lease distributor gives (lease.MaxTTL).
const directLockTTL = lease.MaxTTL

func (a *app) planCommand() *cobra.Command {
	var f publishFlags
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "plan --pipeline P --bundle LOCATION [--destination D]",
		Short: "Show what apply would do, changing nothing",
		Args:  noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			req, cfg, err := a.loadRequest(&f)
			if err != nil {
				return err
			}

			// Planning reads only: no lease, no NATS.
			svc := a.newService(cfg, a.log, nil, 0)
			ctx := cmd.Context()
			dests, err := svc.Destinations(req)
			if err != nil {
				return withCode(exitUsage, err)
			}
			b, err := svc.OpenBundle(ctx, req)
			if err != nil {
				return err
			}
			done := make([]service.Done, len(dests))
			for i, d := range dests {
				pctx, end := a.withProgress(ctx, d.ID)
				res, err := svc.Plan(pctx, req, b, d)
				end()

				// A plan that apply would refuse exits like apply (3).
				if err == nil && res.Plan.Superseded != nil {
					err = superseded(req, b, d, res)
				}
				if err == nil && res.Plan.Blocked() {
					err = fmt.Errorf("%w in %s: apply would write nothing there: %d planned path(s) are blocked by content distributor does not manage", service.ErrCollision, res.Root, len(res.Plan.Collisions))
				}
				done[i] = service.Done{Destination: d, Result: res, Err: err}
			}
			return a.printDone(done, eachOptions{asJSON: asJSON, planOnly: true})
		},
	}
	f.register(cmd)
	cmd.Flags().BoolVar(&f.takeOwnership, "take-ownership", false, "plan adopting colliding unmanaged paths")
	cmd.Flags().BoolVar(&f.allowOlder, "allow-older", false, "plan publishing a bundle older than the version the destination holds (a roll back)")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the plans as JSON")
	return cmd
}

func (a *app) applyCommand() *cobra.Command {
	var f publishFlags
	var asJSON bool
	var timeout config.Duration
	cmd := &cobra.Command{
		Use:   "apply --pipeline P --bundle LOCATION [--destination D] [--take-ownership] [--allow-older]",
		Short: "Publish a bundle to the pipeline's destinations now, without NATS",
		Args:  noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			req, cfg, err := a.loadRequest(&f)
			if err != nil {
				return err
			}
			if timeout < 0 {
				return usageErr("--timeout %s: must not be negative", timeout)
			}
			if err := cfg.SecretsFromEnv(); err != nil {
				return err
			}

			// One deadline for the whole run, named when it passes.
			limit, setting := time.Duration(cfg.PublicationTimeout), "publication_timeout"
			if timeout > 0 {
				limit, setting = time.Duration(timeout), "--timeout"
			}
			ctx := cmd.Context()
			if limit > 0 {
				var cancel context.CancelFunc
				ctx, cancel = service.WithDeadline(ctx, "apply", limit, setting)
				defer cancel()
			}
			s, err := a.directSession(ctx, cfg)
			if err != nil {
				return err
			}
			defer s.close()
			s.svc.Timeout = 0 // the run's deadline bounds every publication
			dests, err := s.svc.Destinations(req)
			if err != nil {
				return withCode(exitUsage, err)
			}

			// With NATS there, downstream hears of this publication like of
			// any other: one result event per destination.
			req.BundleEventID = "apply." + events.NewEventID()
			if a.drawsProgress() {
				// One progress display at a time.
				s.svc.Around, s.svc.Parallel = a.withDestinationProgress, 1
			}
			b, done := s.svc.Publish(ctx, req, dests)
			if b == nil {
				return service.Named(ctx, done[0].Err) // an unusable bundle: no destination ran
			}
			if s.ledger == nil {
				// Without NATS no serve hears of it: the targets are told here.
				a.notifyInline(ctx, done, req, b.Digest)
			}
			for i, d := range done {
				if s.ledger != nil {
					// Reported even when the deadline has passed.
					s.report(context.WithoutCancel(ctx), a, service.ResultEvent(d.Destination.ID, d.Result, d.Err, req.Direct(b.Digest)))
				}
				if errors.Is(d.Err, service.ErrSuperseded) {
					done[i].Err = fmt.Errorf("%w; use --allow-older to roll back", d.Err)
				}
			}
			return a.printDone(done, eachOptions{asJSON: asJSON})
		},
	}
	f.register(cmd)
	cmd.Flags().BoolVar(&f.takeOwnership, "take-ownership", false, "adopt colliding unmanaged paths for this publication (named in the output)")
	cmd.Flags().BoolVar(&f.allowOlder, "allow-older", false, "publish even if the destination holds a newer version of this source (a deliberate roll back)")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the results as JSON")
	cmd.Flags().Var(&timeout, "timeout", "how long the whole apply may take, e.g. 30m (default: publication_timeout, 10m)")
	return cmd
}

// eachOptions are how eachDestination prints: as JSON, and what a plan
// would do rather than what apply did.
type eachOptions struct {
	asJSON, planOnly bool
}

// printDone prints what each destination came to, in order; the first
// error decides the exit code.
func (a *app) printDone(done []service.Done, o eachOptions) error {
	var first error
	var failed []string // "dest: error" of every failure after the first
	var reports []resultJSON
	for _, dd := range done {
		d, res, err := dd.Destination, dd.Result, dd.Err
		if o.asJSON {
			reports = append(reports, a.toResultJSON(d, res, err, o.planOnly))
		} else {
			a.printResult(d, res, err, o.planOnly)
		}
		switch {
		case err != nil && first == nil:
			first = fmt.Errorf("%s: %w", d.ID, err)
		case err != nil:
			failed = append(failed, d.ID+": "+oneLine(err.Error()))
		}
	}
	if o.asJSON {
		enc := json.NewEncoder(a.stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(reports); err != nil {
			return err
		}
	}
	if first != nil && len(done) > 1 {
		if len(failed) > 0 {
			return fmt.Errorf("not every destination succeeded: %w; %s", first, strings.Join(failed, "; "))
		}
		return fmt.Errorf("not every destination succeeded: %w", first)
	}
	return errors.Unwrap(first) // one destination: no need to name it
}

// counts are what a publication did (apply) or would do (plan); both are
// computed so that a plan's counts equal those of the apply that follows
// it: a blocked or superseded publication writes and deletes nothing.
type counts struct {
	Create    int `json:"create"`
	Update    int `json:"update"`
	Unchanged int `json:"unchanged"`
	Delete    int `json:"delete"`
	Collision int `json:"collision"`

	// KeptNewer: paths an older additive bundle leaves as a newer version
	// of its source wrote them.
	KeptNewer int `json:"kept_newer,omitempty"`
}

// planCounts counts what apply would do with p.
func planCounts(p planner.Plan) counts {
	c := counts{Collision: len(p.Collisions)}
	if p.Blocked() || p.Superseded != nil {
		return c
	}
	c.Create, c.Update, c.Unchanged = p.Count(planner.Create), p.Count(planner.Update), p.Count(planner.Unchanged)
	c.Delete, c.KeptNewer = len(p.Deletes()), p.Count(planner.KeptNewer)
	return c
}

// resultCounts counts what a publication did.
func resultCounts(res service.Result) counts {
	c := counts{Unchanged: res.Unchanged, Delete: len(res.Deleted), Update: len(res.Updated), KeptNewer: res.KeptNewer}
	if res.Plan.Blocked() {
		c.Collision = len(res.Plan.Collisions)
	}
	for _, it := range res.Written {
		if it.Action == planner.Create {
			c.Create++
		} else {
			c.Update++
		}
	}
	return c
}

// maxListed bounds the changes listed per destination on a terminal
// (--verbose lists them all): a 10,000-file publication prints a summary.
const maxListed = 20

func (a *app) printResult(d config.Destination, res service.Result, err error, planOnly bool) {
	p := res.Plan

	// One write per 64 KiB, not per line: a republish that updates 10,000
	// records lists them all when stdout is not a terminal, and a write
	// each to a pipe would cost more than the publication.
	out := bufio.NewWriterSize(a.stdout, 64<<10)
	defer out.Flush()
	fmt.Fprintf(out, "%s (%s, %s)\n", d.ID, a.showRoot(res.Root), d.Workflow)
	if errors.Is(err, service.ErrSuperseded) {
		// Nothing was planned: the one line says why and what to do.
		fmt.Fprintf(out, "  %s\n", oneLine(err.Error()))
		return
	}
	if res.Recovered {
		fmt.Fprintf(out, "  recovered an interrupted earlier run\n")
	}
	limit := -1
	if a.stdoutIsTerminal() && !a.verbose {
		limit = maxListed
	}
	lines := &changeLines{out: out, limit: limit}
	line := lines.add
	marks := map[planner.Action]string{planner.Create: "+", planner.Update: "~", planner.Delete: "-", planner.Collision: "!", planner.Unchanged: "="}
	for _, it := range p.Items {
		mark := marks[it.Action]

		// A blocked publication changes nothing: only what blocks it is news.
		// Kept paths are counted, not listed: they are the newer version's.
		if it.Action == planner.Unchanged || it.Action == planner.KeptNewer || (p.Blocked() && it.Action != planner.Collision) {
			continue
		}
		note := ""
		if it.Adopted {
			note = " (adopted: --take-ownership)"
		}
		if it.Action == planner.Update && !it.Write {
			note = " (record only)"
		}
		if it.Displaced {
			note = " (in the way of a planned path)"
		}
		if len(it.InTheWay) > 0 {
			note = fmt.Sprintf(" (unmanaged in the way: %s)", strings.Join(it.InTheWay, ", "))
		}
		line(mark, it.Path, note)
	}
	if !p.Blocked() {
		for _, c := range p.Clear {
			line("-", c, " (legacy state: cleared)")
		}
	}
	if lines.hidden > 0 {
		fmt.Fprintf(out, "  … and %d more (--verbose lists every change, --json prints them all)\n", lines.hidden)
	}
	if planOnly {
		c := planCounts(p)
		fmt.Fprintf(out, "  would create %d, update %d, delete %d; %d unchanged, %d collision%s\n", c.Create, c.Update, c.Delete, c.Unchanged, c.Collision, keptNote(c))
		if groups := planGroups(p, d.PublishLast); groups != nil {
			fmt.Fprintf(out, "  visible in order: %s\n", groupsLine(groups))
		}
		if err != nil {
			fmt.Fprintf(out, "  apply would write nothing\n")
		}
		return
	}
	c := resultCounts(res)
	fmt.Fprintf(out, "  %d create, %d update, %d unchanged, %d delete, %d collision%s\n", c.Create, c.Update, c.Unchanged, c.Delete, c.Collision, keptNote(c))
	if err != nil {
		// The error itself goes to stderr, once; the word says what kind.
		fmt.Fprintf(out, "  %s\n", outcomeWord(err))
	}
}

// groupJSON is one publish_last group of a plan's writes: those whose
// first matching glob is Glob ("": those matching none, visible first).
type groupJSON struct {
	Glob   string `json:"glob"`
	Writes int    `json:"writes"`
}

// planGroups says how the plan's writes fall into the destination's
// publish_last groups, in the order they become visible; nil without
// publish_last or writes to make.
func planGroups(p planner.Plan, publishLast []string) []groupJSON {
	if len(publishLast) == 0 || p.Blocked() || p.Superseded != nil {
		return nil
	}
	groups := make([]groupJSON, len(publishLast)+1)
	for i, g := range publishLast {
		groups[i+1].Glob = g
	}
	for _, it := range p.Writes() {
		groups[service.VisibilityGroup(it.Path, publishLast)].Writes++
	}
	return groups
}

// groupsLine is the plan's line of its groups (deletes last).
func groupsLine(groups []groupJSON) string {
	parts := []string{fmt.Sprintf("%d matching no group", groups[0].Writes)}
	for _, g := range groups[1:] {
		parts = append(parts, fmt.Sprintf("%d matching %q", g.Writes, g.Glob))
	}
	return strings.Join(parts, ", then ") + ", then the deletes"
}

// outcomeWord names what an error of a publication came to: a collision
// is no failure, and a refusal by the destination's state neither.
func outcomeWord(err error) string {
	switch o := service.Classify(err); {
	case o.Type == events.TypeCollision:
		return "collision: nothing written"
	case o.ExitCode == exitRefused:
		return "refused"
	}
	return "failed"
}

// keptNote ends a summary line with the paths kept for a newer version, if
// any (only an older additive bundle has them).
func keptNote(c counts) string {
	if c.KeptNewer == 0 {
		return ""
	}
	return fmt.Sprintf("; %d kept (a newer version of the owner wrote them)", c.KeptNewer)
}

type resultJSON struct {
	Destination string `json:"destination"`

	// Root is the absolute root (file path or s3:// URL); RootAsWritten is
	// the path as the configuration file gives it, when that differs.
	Root          string `json:"root"`
	RootAsWritten string `json:"root_as_written,omitempty"`

	// Counts are what apply did, or (plan) what it would do.
	Counts     counts     `json:"counts"`
	Workflow   string     `json:"workflow"`
	Changed    bool       `json:"changed"`
	Items      []itemJSON `json:"items"`
	Collisions []string   `json:"collisions"`
	Clear      []string   `json:"clear,omitempty"`
	Recovered  bool       `json:"recovered,omitempty"`

	// SupersededBy is the newer version the destination holds, when it
	// refused this older one.
	SupersededBy *catalog.Source `json:"superseded_by,omitempty"`

	// Groups are the writes in the destination's publish_last groups, in
	// the order they become visible; absent without publish_last.
	Groups []groupJSON `json:"groups,omitempty"`
	Error  string      `json:"error,omitempty"`
}

type itemJSON struct {
	Path    string `json:"path"`
	Action  string `json:"action"`
	Write   bool   `json:"write"`
	Adopted bool   `json:"adopted,omitempty"`
	SHA256  string `json:"sha256,omitempty"`
	Size    int64  `json:"size"`
	URL     string `json:"url,omitempty"`

	// Displaced marks a delete that makes room for a planned path;
	// InTheWay names the unmanaged content blocking a collision.
	Displaced bool     `json:"displaced,omitempty"`
	InTheWay  []string `json:"in_the_way,omitempty"`
}

func (a *app) toResultJSON(d config.Destination, res service.Result, err error, planOnly bool) resultJSON {
	out := resultJSON{Destination: d.ID, Root: res.Root, RootAsWritten: a.rootAsWritten(res.Root), Workflow: string(d.Workflow), Changed: res.Plan.Changed,
		Items: []itemJSON{}, Collisions: res.Plan.Collisions, Clear: res.Plan.Clear, Recovered: res.Recovered,
		SupersededBy: res.Plan.Superseded}
	if out.Collisions == nil {
		out.Collisions = []string{}
	}
	out.Counts = resultCounts(res)
	if planOnly {
		out.Counts = planCounts(res.Plan)
	}
	for _, it := range res.Plan.Items {
		j := itemJSON{Path: it.Path, Action: string(it.Action), Write: it.Write, Adopted: it.Adopted, Displaced: it.Displaced, InTheWay: it.InTheWay}
		if it.Desired != nil {
			j.SHA256, j.Size, j.URL = it.Desired.SHA256, it.Desired.Size, it.Desired.URL
		} else {
			j.SHA256, j.Size, j.URL = it.Record.SHA256, it.Record.Size, it.Record.URL
		}
		out.Items = append(out.Items, j)
	}
	out.Groups = planGroups(res.Plan, d.PublishLast)
	if err != nil {
		out.Error = a.errorLine(err)
	}
	return out
}

// superseded is the error of a plan that the destination's newer version of
// the source supersedes (apply gets it from the engine).
func superseded(req service.Request, b *bundle.Bundle, d config.Destination, res service.Result) error {
	return fmt.Errorf("%w; use --allow-older to roll back", &service.SupersededError{
		Root: res.Root, Owner: catalog.Owner{PipelineID: req.PipelineID, DestinationID: d.ID},
		Source: catalog.Source{ID: b.Manifest.ID, Digest: b.Digest, Created: b.Manifest.Created.UTC()},
		By:     *res.Plan.Superseded,
	})
}

// absLocation turns a relative folder given on the command line into an
// absolute path; URLs (file://, s3://) pass unchanged. Events and configs
// keep requiring absolute locations: a relative one means nothing to a
// serve process elsewhere.
func absLocation(loc string) (string, error) {
	if loc == "" || strings.Contains(loc, "://") || filepath.IsAbs(loc) {
		return loc, nil
	}
	abs, err := filepath.Abs(loc)
	if err != nil {
		return "", usageErr("bundle location %q: %v", loc, err)
	}
	return abs, nil
}

// changeLines writes "  mark path note" lines, at most limit of them (-1:
// all), and counts the rest. A line is put together in one buffer, not
// formatted: a republish may list 10,000 lines.
type changeLines struct {
	out            *bufio.Writer
	limit          int
	listed, hidden int
	buf            []byte
}

func (c *changeLines) add(mark, path, note string) {
	if c.limit >= 0 && c.listed >= c.limit {
		c.hidden++
		return
	}
	c.listed++
	c.buf = append(append(append(append(append(c.buf[:0], "  "...), mark...), ' '), path...), note...)

	// As with the fmt lines around it, a failed write to stdout is not
	// reported: the bufio.Writer keeps its first error and drops the rest.
	_, _ = c.out.Write(append(c.buf, '\n'))
}
