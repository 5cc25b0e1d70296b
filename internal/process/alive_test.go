package process

import (
	"os"
	"os/exec"
	"testing"
)

func TestAlive(t *testing.T) {
	t.Parallel()
	if !Alive(os.Getpid()) {
		t.Fatal("this process does not count as running")
	}
	if Alive(0) || Alive(-1) {
		t.Fatal("a pid of 0 or below counts as running")
	}
	// A child that has exited and been waited for is gone.
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(self, "-test.run=^$")
	if err := cmd.Run(); err != nil {
		t.Fatal(err)
	}
	if Alive(cmd.Process.Pid) {
		t.Errorf("the exited child (pid %d) counts as running", cmd.Process.Pid)
	}
}
