package main

import (
	"path/filepath"
	"testing"
)

// A configuration file that is not there gets one line naming the file
// looked for and the flag that names another, exit 2; with the default
// --config too.
func TestMissingConfigNamesFileAndFlag(t *testing.T) {
	t.Chdir(t.TempDir())
	dir, err := filepath.Abs(".")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		args []string
		file string
	}{
		{[]string{"status"}, filepath.Join(dir, "distributor.yaml")},
		{[]string{"status", "--config", "conf/d.yaml"}, filepath.Join(dir, "conf", "d.yaml")},
		{[]string{"config", "validate"}, filepath.Join(dir, "distributor.yaml")},
	} {
		code, stdout, stderr := runCmd(t, c.args...)
		want := "distributor: no configuration file " + c.file + ": give its path with --config PATH\n"
		if code != exitUsage || stdout != "" || stderr != want {
			t.Errorf("%q: exit %d, stdout %q, stderr\n%q\nwant exit %d and\n%q", c.args, code, stdout, stderr, exitUsage, want)
		}
	}
}
