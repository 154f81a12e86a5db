package chaos

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// testBin is the engenho binary the campaign tests run: $ENGENHO_CHAOS_BIN
// (make chaos-selftest passes the one it built), else one built here. Both
// are the chaos build (-tags chaos): only it has the fault hooks.
var testBin string

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	testBin = os.Getenv("ENGENHO_CHAOS_BIN")
	if testBin == "" {
		dir, err := os.MkdirTemp("", "engenho-chaos-bin-")
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		defer os.RemoveAll(dir)
		testBin = filepath.Join(dir, "engenho")
		cmd := exec.Command("go", "build", "-tags", "chaos", "-o", testBin, "github.com/engenho/engenho/cmd/engenho")
		cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
		if err := cmd.Run(); err != nil {
			fmt.Fprintln(os.Stderr, "building engenho for the campaign tests:", err)
			return 1
		}
	}
	// A binary without the tag refuses chaos.enabled: say so up front.
	if out, err := exec.Command(testBin, "chaos").CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "%s is not the chaos build (go build -tags chaos ./cmd/engenho): %v\n%s", testBin, err, out)
		return 1
	}
	return m.Run()
}
