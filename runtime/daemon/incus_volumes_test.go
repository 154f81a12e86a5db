package daemon_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/engenho/engenho/drivers/incus"
)

// Issue 15 on a real incusd, end to end through apply: a Compose service
// on the incus driver with a named volume and a file secret. The workload
// serves the secret's hash (so the value reached /run/secrets) and a
// counter it keeps in the volume; a redeploy replaces the container and
// the count goes on (the volume outlived it); remove --volumes deletes the
// volume.
func TestIncusVolumesAndSecretsEndToEnd(t *testing.T) {
	needIncus(t)
	n := newNode(t)
	n.extra = "drivers: {incus: {enabled: true}}\n"
	n.writeConfig()
	n.start("running")
	removed := false
	defer func() {
		if !removed && n.cmd != nil {
			n.cli("remove", "incvol", "--volumes")
		}
	}()
	pw := "pw-" + randomHex(t, 8)
	n.writeFile("pw.txt", pw)
	file := n.writeFile("incvol.yaml", `name: incvol
services:
  web:
    image: busybox
    command: ["sh", "-c", "c=$$(cat /data/count 2>/dev/null || echo 0); c=$$((c+1)); echo $$c > /data/count; mkdir -p /www; { sha256sum /run/secrets/pw | cut -d' ' -f1; echo count=$$c; } > /www/index.html; exec httpd -f -p 80 -h /www"]
    ports: ["127.0.0.1:18082:80"]
    volumes: [data:/data]
    secrets: [pw]
    healthcheck:
      http: {path: /, port: 80}
      interval: 1s
    x-engenho: {driver: incus}
secrets:
  pw: {file: ./pw.txt}
volumes:
  data:
`)
	n.mustCLI("apply", file, "--wait")
	want := sha256Hex(pw)
	body, err := get("http://127.0.0.1:18082/")
	if err != nil || !strings.Contains(body, want) || !strings.Contains(body, "count=1") {
		t.Fatalf("first run: %q %v (want the secret's hash and count=1)", body, err)
	}

	before := instances(n.service("incvol", "web"))
	n.mustCLI("redeploy", "incvol/web")
	n.eventually("a new container", 3*time.Minute, func() bool {
		s := n.service("incvol", "web")
		now := instances(s)
		if !converged(s) || len(now) != 1 {
			return false
		}
		for name := range now {
			if _, old := before[name]; old {
				return false
			}
		}
		return true
	})
	n.eventually("the count kept in the volume", 30*time.Second, func() bool {
		body, err = get("http://127.0.0.1:18082/")
		return err == nil && strings.Contains(body, "count=2") && strings.Contains(body, want)
	})

	out := n.mustCLI("remove", "incvol", "--volumes")
	removed = true
	if !strings.Contains(out, "deleted volume incvol_data") {
		t.Errorf("remove --volumes:\n%s", out)
	}
	d, err := incus.New(incus.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if left, err := d.ListVolumes(context.Background(), "incvol_"); err != nil || len(left) != 0 {
		t.Errorf("volumes left after remove --volumes: %v %v", left, err)
	}
}
