package main

import (
	"fmt"
	"runtime"
	"runtime/debug"

	"github.com/spf13/cobra"
)

// revision is the VCS revision the binary was built from ("" when unknown).
var revision string

func init() {
	info, _ := debug.ReadBuildInfo()
	version, revision = resolveVersion(version, info)
}

// resolveVersion picks the version a binary reports and writes into
// catalogs: the -ldflags value (releases), else the module version the
// go command stamped (a tagged `go install`, or a pseudo-version of the
// checkout), else "devel+<revision>"; "dev" only when nothing is known
// (go run or go test outside a checkout).
func resolveVersion(ldflags string, info *debug.BuildInfo) (ver, rev string) {
	modified := false
	if info != nil {
		for _, s := range info.Settings {
			switch s.Key {
			case "vcs.revision":
				rev = s.Value
			case "vcs.modified":
				modified = s.Value == "true"
			}
		}
	}
	switch {
	case ldflags != "" && ldflags != "dev":
		ver = ldflags
	case info != nil && info.Main.Version != "" && info.Main.Version != "(devel)":
		ver = info.Main.Version
	case rev != "":
		ver = "devel+" + rev[:min(12, len(rev))]
		if modified {
			ver += ".dirty"
		}
	default:
		ver = "dev"
	}
	return ver, rev
}

// versionLine is what `distributor version` and --version print.
func versionLine() string {
	s := "distributor " + version
	if revision != "" {
		s += " revision " + revision
	}
	return s + " " + runtime.Version()
}

func (a *app) versionCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print the version, VCS revision and Go version",
		Args:  noArgs,
		RunE: func(*cobra.Command, []string) error {
			_, err := fmt.Fprintln(a.stdout, versionLine())
			return err
		},
	}
}
