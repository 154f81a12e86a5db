package daemon_test

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// Compose volumes end to end on the process driver (issue 15): a named
// volume outlives a redeploy of its service; `engenho remove` keeps the
// volumes by default; `remove --volumes` deletes the stack's own once its
// instances are gone, says which, and leaves an external one alone.
func TestVolumesThroughApplyAndRemove(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("the process driver mounts volumes as root")
	}
	n := newNode(t)
	target := filepath.Join(n.dir, "mnt")
	if err := os.Mkdir(target, 0o755); err != nil {
		t.Fatal(err)
	}
	conf := filepath.Join(n.dir, "conf")
	os.Mkdir(conf, 0o755)
	os.WriteFile(filepath.Join(conf, "greeting"), []byte("hi from the host"), 0o644)
	proof := filepath.Join(n.dir, "proof")
	stack := func(version string) string {
		return n.writeFile("vols.yaml", fmt.Sprintf(`name: vols
services:
  app:
    command: ["/bin/sh", "-c", "echo %[1]s >> %[2]s/runs; cat %[3]s/greeting > %[4]s.tmp; cat %[2]s/runs >> %[4]s.tmp; mv %[4]s.tmp %[4]s; exec sleep 100000"]
    volumes:
      - data:%[2]s
      - ./conf:%[3]s:ro
      - {type: volume, source: shared, target: /srv}
    stop_grace_period: 1s
volumes:
  data:
  shared: {external: true}
`, version, target, conf, proof))
	}
	n.start("running")
	// An external volume must exist: apply refuses it otherwise.
	out, code := n.cli("apply", stack("v1"))
	if code == 0 || !strings.Contains(out, "external volume shared does not exist") {
		t.Errorf("apply with a missing external volume: exit %d\n%s", code, out)
	}
	if err := os.MkdirAll(filepath.Join(n.data(), "volumes", "shared"), 0o755); err != nil {
		t.Fatal(err)
	}
	n.mustCLI("apply", stack("v1"))
	n.eventually("the first run wrote its proof", 60*time.Second, func() bool {
		b, _ := os.ReadFile(proof)
		return string(b) == "hi from the hostv1\n"
	})
	n.mustCLI("apply", stack("v2"))
	n.eventually("the second run read the first run's write", 60*time.Second, func() bool {
		b, _ := os.ReadFile(proof)
		return string(b) == "hi from the hostv1\nv2\n"
	})
	vol := filepath.Join(n.data(), "volumes", "vols_data")
	if _, err := os.Stat(filepath.Join(target, "runs")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the volume's writes reached the host path: %v", err)
	}

	out = n.mustCLI("remove", "vols", "--volumes")
	if !strings.Contains(out, "deleted volume vols_data") || strings.Contains(out, "shared") {
		t.Errorf("remove --volumes output:\n%s", out)
	}
	if _, err := os.Stat(vol); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("volume vols_data still there: %v", err)
	}
	if _, err := os.Stat(filepath.Join(n.data(), "volumes", "shared")); err != nil {
		t.Errorf("the external volume was deleted: %v", err)
	}
	if b, err := os.ReadFile(filepath.Join(conf, "greeting")); err != nil || string(b) != "hi from the host" {
		t.Errorf("the bind source changed: %q, %v", b, err)
	}

	// Without --volumes, the volume stays for the next apply.
	os.Remove(proof)
	n.mustCLI("apply", stack("v3"))
	n.eventually("the third run", 60*time.Second, func() bool {
		b, _ := os.ReadFile(proof)
		return string(b) == "hi from the hostv3\n"
	})
	if out := n.mustCLI("remove", "vols"); strings.Contains(out, "deleted volume") {
		t.Errorf("remove without --volumes deleted volumes:\n%s", out)
	}
	n.eventually("vols gone", 60*time.Second, func() bool {
		st, err := n.status()
		if err != nil {
			return false
		}
		for _, s := range st.Services {
			if s.Stack == "vols" {
				return false
			}
		}
		return true
	})
	if _, err := os.Stat(vol); err != nil {
		t.Errorf("remove without --volumes deleted the volume: %v", err)
	}
	if code := n.stop(); code != 0 {
		t.Fatalf("daemon exit %d", code)
	}
}
