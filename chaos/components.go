package chaos

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/engenho/engenho/chaos/report"
	"github.com/engenho/engenho/chaos/schedule"
	"github.com/engenho/engenho/drivers/cgroup"
)

// incusSocket is where the campaign looks for incusd.
const incusSocket = "/var/lib/incus/unix.socket"

// components is what the machine offers a campaign.
type components struct {
	incus     bool
	incusNote string
	s3        bool
	s3Note    string
	s3Restart bool // ENGENHO_S3_RESTART names a command that restarts it
	cgroups   bool // memory cgroups the process driver can make (root)
	cgNote    string
	disk      bool // node a's data directory on a file system of its own
	diskNote  string
	fuse      bool // that file system behind a fault file system (disk.eio)
	fuseNote  string
	hosts     bool // the fs host pair runs
	s3Hosts   bool // the s3 host pair runs
	hostsNote string
}

// drawn names what a schedule is drawn with (report.Report.Drawn).
func (c components) drawn() []string {
	var out []string
	for _, x := range []struct {
		on   bool
		name string
	}{{c.incus, "incus"}, {c.hosts, "hosts"}, {c.s3Hosts, "s3-hosts"}, {c.cgroups, "cgroups"}, {c.disk, "disk"}, {c.fuse, "fuse"}, {c.s3Restart, "s3-restart"}} {
		if x.on {
			out = append(out, x.name)
		}
	}
	return out
}

// componentsDrawn is the inverse of drawn.
func componentsDrawn(names []string) components {
	var c components
	for _, n := range names {
		switch n {
		case "incus":
			c.incus = true
		case "hosts":
			c.hosts = true
		case "s3-hosts":
			c.s3Hosts = true
		case "cgroups":
			c.cgroups = true
		case "disk":
			c.disk = true
		case "fuse":
			c.fuse = true
		case "s3-restart":
			c.s3Restart = true
		}
	}
	return c
}

// hostTargets are the host pairs that run.
func (c components) hostTargets() []schedule.Target {
	var out []schedule.Target
	if c.hosts {
		out = append(out, schedule.Target{Service: svcParkFS, Driver: "host"})
	}
	if c.s3Hosts {
		out = append(out, schedule.Target{Service: svcParkS3, Driver: "host", S3: true})
	}
	return out
}

// detect looks for incusd (with the busybox image drivers/incus/setup.sh
// imports) and an S3 server (the ENGENHO_S3_* environment .ci/minio.sh
// writes).
func detect(ctx context.Context) components {
	var c components
	c.incus, c.incusNote = detectIncus(ctx)
	c.s3, c.s3Note = detectS3(ctx)
	c.s3Restart = c.s3 && os.Getenv(s3RestartEnv) != ""
	c.cgroups, c.cgNote = detectCgroups()
	return c
}

// detectCgroups says whether the process driver can give a replica a
// memory limit here (root, a memory controller): workload.oom needs one.
func detectCgroups() (bool, string) {
	h, err := cgroup.Detect(cgroup.Options{Root: "engenho-chaos-probe"})
	if err != nil {
		return false, err.Error()
	}
	defer func() { _ = h.RemoveRoot() }()
	if err := h.Missing("memory"); err != nil {
		return false, err.Error()
	}
	return true, h.Describe()
}

func detectIncus(ctx context.Context) (bool, string) {
	if _, err := os.Stat(incusSocket); err != nil {
		return false, "no incusd socket at " + incusSocket + " (bash drivers/incus/setup.sh)"
	}
	client := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, "unix", incusSocket)
		}}}
	defer client.CloseIdleConnections()
	for _, path := range []string{"/1.0", "/1.0/images/aliases/busybox"} {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://incus"+path, nil)
		if err != nil {
			return false, err.Error()
		}
		resp, err := client.Do(req)
		if err != nil {
			return false, "incusd does not answer on " + incusSocket
		}
		_ = resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return false, fmt.Sprintf("incusd: GET %s: HTTP %d (bash drivers/incus/setup.sh imports the busybox image)", path, resp.StatusCode)
		}
	}
	return true, "incusd on " + incusSocket + ", image busybox"
}

func detectS3(ctx context.Context) (bool, string) {
	endpoint := os.Getenv("ENGENHO_S3_ENDPOINT")
	if endpoint == "" {
		return false, "ENGENHO_S3_ENDPOINT not set (eval \"$(bash .ci/minio.sh start)\")"
	}
	u, err := url.Parse(endpoint)
	if err != nil || u.Host == "" {
		return false, "ENGENHO_S3_ENDPOINT is not a URL"
	}
	conn, err := (&net.Dialer{Timeout: 3 * time.Second}).DialContext(ctx, "tcp", u.Host)
	if err != nil {
		return false, "the S3 server at " + u.Host + " does not answer"
	}
	_ = conn.Close()
	return true, "S3 server at " + u.Host
}

// require fails when a component ENGENHO_REQUIRE names is missing.
func (c components) require(names []string) error {
	var missing []string
	for _, n := range names {
		switch strings.TrimSpace(n) {
		case "incus":
			if !c.incus {
				missing = append(missing, "incus ("+c.incusNote+")")
			}
		case "s3":
			if !c.s3 {
				missing = append(missing, "s3 ("+c.s3Note+")")
			}
		case "cgroups":
			if !c.cgroups {
				missing = append(missing, "cgroups ("+c.cgNote+")")
			}
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("required by ENGENHO_REQUIRE but unavailable: %s", strings.Join(missing, "; "))
	}
	return nil
}

// requireDisk fails when ENGENHO_REQUIRE names disk or fuse and node a's
// data disk (or the fault file system over it) could not be made: known
// only once node a's directory exists, after require.
func (c components) requireDisk(names []string) error {
	for _, n := range names {
		switch strings.TrimSpace(n) {
		case "disk":
			if !c.disk {
				return fmt.Errorf("required by ENGENHO_REQUIRE but unavailable: disk (%s)", c.diskNote)
			}
		case "fuse":
			if !c.fuse {
				return fmt.Errorf("required by ENGENHO_REQUIRE but unavailable: fuse (%s)", c.fuseNote)
			}
		}
	}
	return nil
}

// requireHosts fails when ENGENHO_REQUIRE names s3 but the S3 host pair
// did not come up: a campaign that silently drops the S3 faults would pass
// without having tried them.
func (c components) requireHosts(names []string, noHosts bool) error {
	if noHosts || !c.s3 || c.s3Hosts {
		return nil
	}
	for _, n := range names {
		if strings.TrimSpace(n) == "s3" {
			return fmt.Errorf("required by ENGENHO_REQUIRE but unavailable: the S3 host pair (%s)", c.hostsNote)
		}
	}
	return nil
}

// list is the report's view.
func (c components) list() []report.Component {
	hostsNote := "two nodes sharing the fs store run a hibernating host: host, sidecar, lease and object-store faults are drawn"
	if c.s3Hosts {
		hostsNote += "; a second pair shares the S3 bucket"
	}
	if !c.hosts {
		hostsNote = "no host pair runs (" + c.hostsNote + "): host, sidecar, lease and object-store faults are left out"
	}
	s3Note := c.s3Note
	if c.s3 && !c.s3Hosts {
		s3Note += "; unused: the S3 host pair did not start"
	}
	return []report.Component{
		{Name: "process", Available: true, Note: "the process driver"},
		{Name: "fs", Available: true, Note: "the fs object store (shared by the campaign's nodes)"},
		{Name: "incus", Available: c.incus, Note: c.incusNote},
		{Name: "s3", Available: c.s3, Note: s3Note},
		{Name: "cgroups", Available: c.cgroups, Note: c.cgNote},
		{Name: "disk", Available: c.disk, Note: c.diskNote},
		{Name: "fuse", Available: c.fuse, Note: c.fuseNote},
		{Name: "hosts", Available: c.hosts, Note: hostsNote},
	}
}

// incusClient talks to incusd's REST API on its unix socket.
func incusClient() *http.Client {
	return &http.Client{Timeout: time.Minute, Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, "unix", incusSocket)
		}}}
}

// deleteIncusStack force-deletes every incus instance labelled with
// stack: the teardown's cleanup of what a broken daemon left behind (a
// planted bug hides instances from the daemon itself).
func deleteIncusStack(ctx context.Context, stack string) (int, error) {
	client := incusClient()
	defer client.CloseIdleConnections()
	var list struct {
		Metadata []struct {
			Name   string            `json:"name"`
			Config map[string]string `json:"config"`
		} `json:"metadata"`
	}
	env, err := incusDo(ctx, client, http.MethodGet, "/1.0/instances?recursion=1", "")
	if err != nil {
		return 0, err
	}
	if err := json.Unmarshal(env.Metadata, &list.Metadata); err != nil {
		return 0, fmt.Errorf("incusd instances: %w", err)
	}
	n := 0
	for _, in := range list.Metadata {
		if in.Config["user.engenho.stack"] != stack {
			continue
		}
		_ = incusWait(ctx, client, http.MethodPut, "/1.0/instances/"+url.PathEscape(in.Name)+"/state", `{"action":"stop","force":true}`)
		if err := incusWait(ctx, client, http.MethodDelete, "/1.0/instances/"+url.PathEscape(in.Name), ""); err != nil {
			return n, err
		}
		n++
	}
	return n, nil
}

// incusWait makes an async call and waits for its operation.
func incusWait(ctx context.Context, client *http.Client, method, path, body string) error {
	env, err := incusDo(ctx, client, method, path, body)
	if err != nil || env.Operation == "" {
		return err
	}
	_, err = incusDo(ctx, client, http.MethodGet, env.Operation+"/wait?timeout=60", "")
	return err
}

// incusEnvelope is incusd's answer.
type incusEnvelope struct {
	Type      string          `json:"type"`
	Error     string          `json:"error"`
	Operation string          `json:"operation"`
	Metadata  json.RawMessage `json:"metadata"`
}

func incusDo(ctx context.Context, client *http.Client, method, path, body string) (incusEnvelope, error) {
	var env incusEnvelope
	req, err := http.NewRequestWithContext(ctx, method, "http://incus"+path, strings.NewReader(body))
	if err != nil {
		return env, err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := client.Do(req)
	if err != nil {
		return env, err
	}
	defer resp.Body.Close()
	if err := json.NewDecoder(resp.Body).Decode(&env); err != nil {
		return env, fmt.Errorf("incusd %s %s: %w", method, path, err)
	}
	if env.Type == "error" || resp.StatusCode >= 400 {
		return env, fmt.Errorf("incusd %s %s: HTTP %d: %s", method, path, resp.StatusCode, env.Error)
	}
	return env, nil
}
