package stackfile

import (
	"reflect"
	"strings"
	"testing"

	"github.com/engenho/engenho/drivers"
)

// SVC-3: an instance is named STACK-SERVICE-SLOT-ID and carries the
// labels stack, service, slot, revision, deployment; its spec holds the
// service's argv (variables substituted), env (real values plus
// engenho's), ports with the allocated host ports, and resources.
func TestInstanceSpecSVC3(t *testing.T) {
	st := mustParse(t, "shop.yaml", `name: shop
services:
  api:
    command: ["${ENGENHO_BIN}", "serve", "--slot=${ENGENHO_SLOT}", "--name=${ENGENHO_INSTANCE}", "$${HOME}"]
    args: ["--stack=${ENGENHO_STACK}/${ENGENHO_SERVICE}"]
    env: {A: "1", PW: {value: pw, secret: true}, LITERAL: "${ENGENHO_BIN}"}
    working_dir: /srv
    user: "1000:1000"
    ports: ["8080:80", "9000"]
    deploy:
      resources: {limits: {cpus: 0.5, memory: 64m}}
`)
	svc := st.Services["api"]
	spec := InstanceSpec(svc, Instance{Stack: "shop", Slot: 3, ID: "k2x9", Deployment: "d7", HostPorts: map[int]int{80: 40001}, Bin: "/usr/bin/engenho"})
	want := drivers.Spec{
		Name: "shop-api-3-k2x9",
		Labels: drivers.Labels{
			drivers.LabelStack: "shop", drivers.LabelService: "api", drivers.LabelSlot: "3",
			drivers.LabelRevision: svc.Revision(), drivers.LabelDeployment: "d7",
		},
		Command: []string{"/usr/bin/engenho", "serve", "--slot=3", "--name=shop-api-3-k2x9", "${HOME}", "--stack=shop/api"},
		Env: map[string]string{
			"A": "1", "PW": "pw", "LITERAL": "${ENGENHO_BIN}", // env values are never substituted
			VarStack: "shop", VarService: "api", VarSlot: "3", VarInstance: "shop-api-3-k2x9",
		},
		SecretEnv:  []string{"PW"}, // SEC-2: the driver keeps PW sealed
		WorkingDir: "/srv",
		User:       "1000:1000",
		Ports:      []drivers.Port{{Target: 80, HostPort: 40001, Protocol: "tcp"}, {Target: 9000, HostPort: 0, Protocol: "tcp"}},
		Resources:  drivers.Resources{CPUs: 0.5, MemoryBytes: 64 << 20},
	}
	if !reflect.DeepEqual(spec, want) {
		t.Fatalf("spec\n got %+v\nwant %+v", spec, want)
	}
	if InstanceName("a", "b", 1, "x") != "a-b-1-x" {
		t.Error("InstanceName")
	}
	// The service is not changed by rendering.
	if svc.Command[0] != "${ENGENHO_BIN}" {
		t.Error("InstanceSpec changed the service")
	}
}

// Sidecars get their own name and labels, the service's env under their
// own, the service's image, user and working dir unless they set one.
func TestSidecarSpec(t *testing.T) {
	st := mustParse(t, "shop.yaml", `name: shop
services:
  api:
    command: [api]
    user: app
    working_dir: /srv
    env: {A: service, B: service}
    sidecars:
      - {name: backup, command: ["${ENGENHO_BIN}", backup], env: {B: sidecar}}
      - {name: other, command: [x], working_dir: /tmp}
`)
	svc := st.Services["api"]
	spec := SidecarSpec(svc, svc.Sidecars[0], Instance{Stack: "shop", Slot: 1, ID: "z1", Deployment: "d1", Bin: "/e"})
	if spec.Name != "shop-api-1-backup-z1" || spec.Labels[LabelSidecar] != "backup" || spec.Labels[drivers.LabelSlot] != "1" {
		t.Errorf("name %s labels %v", spec.Name, spec.Labels)
	}
	if spec.Labels[drivers.LabelRevision] != svc.SidecarRevision(svc.Sidecars[0]) {
		t.Error("sidecar revision label")
	}
	if !reflect.DeepEqual(spec.Command, []string{"/e", "backup"}) || spec.Env["A"] != "service" || spec.Env["B"] != "sidecar" || spec.Env[VarInstance] != spec.Name {
		t.Errorf("command %v env %v", spec.Command, spec.Env)
	}
	if spec.User != "app" || spec.WorkingDir != "/srv" || len(spec.Ports) != 0 {
		t.Errorf("user %q wd %q ports %v", spec.User, spec.WorkingDir, spec.Ports)
	}
	if other := SidecarSpec(svc, svc.Sidecars[1], Instance{Stack: "shop", Slot: 1, ID: "z2"}); other.WorkingDir != "/tmp" {
		t.Error("a sidecar's own working dir wins")
	}
}

// SEC-3: only valid names make it into a path-like instance name.
func TestNamesSEC3(t *testing.T) {
	good := []string{"a", "0", "web", "my-app-2", strings.Repeat("a", 63), "a-"}
	bad := []string{"", "-a", "A", "a_b", "a.b", "a/b", "..", "../etc", "a b", strings.Repeat("a", 64), "é"}
	for _, n := range good {
		if !ValidName(n) {
			t.Errorf("ValidName(%q) = false", n)
		}
	}
	for _, n := range bad {
		if ValidName(n) {
			t.Errorf("ValidName(%q) = true", n)
		}
	}
	hostsGood := []string{"a", "notes.localhost", "a-b.c-d.example.com", "1.2.3.4x", strings.Repeat("a", 63) + ".b"}
	hostsBad := []string{"", ".", "a.", ".a", "a..b", "-a.b", "a-.b", "A.b", "a_b.c", "a/b", "../x", "a b", "a:80", strings.Repeat("a", 64) + ".b", strings.Repeat("a.", 127) + "aa"}
	for _, h := range hostsGood {
		if !ValidHost(h) {
			t.Errorf("ValidHost(%q) = false", h)
		}
	}
	for _, h := range hostsBad {
		if ValidHost(h) {
			t.Errorf("ValidHost(%q) = true", h)
		}
	}
	for id, want := range map[string]bool{"a1": true, "0": true, "": false, "A": false, "a-b": false, strings.Repeat("a", 17): false} {
		if ValidInstanceID(id) != want {
			t.Errorf("ValidInstanceID(%q) != %v", id, want)
		}
	}
	seen := map[string]bool{}
	for range 100 {
		id := NewInstanceID()
		if !ValidInstanceID(id) || len(id) != 8 || seen[id] {
			t.Fatalf("NewInstanceID gave %q (valid %v, seen before %v)", id, ValidInstanceID(id), seen[id])
		}
		seen[id] = true
	}
}

// A dependency comes before its dependents; ties keep file order.
func TestStartOrderSUP7(t *testing.T) {
	st := mustParse(t, "s.yaml", `services:
  web: {command: x, depends_on: [api]}
  api: {command: x, depends_on: [db, cache]}
  worker: {command: x}
  cache: {command: x}
  db: {command: x}
`)
	if got := st.StartOrder(); !reflect.DeepEqual(got, []string{"db", "cache", "api", "web", "worker"}) {
		t.Fatalf("start order %v", got)
	}
}

func TestPortListenAddr(t *testing.T) {
	cases := map[Port]string{
		{Target: 80}: "",
		{Target: 80, Published: 8080, HostIP: "0.0.0.0"}: "0.0.0.0:8080",
		{Target: 80, Published: 8080, HostIP: "::1"}:     "[::1]:8080",
	}
	for p, want := range cases {
		if got := p.ListenAddr(); got != want {
			t.Errorf("%+v: %q, want %q", p, got, want)
		}
	}
}

// Stacks built in code are checked like parsed ones.
func TestCheckCodeBuilt(t *testing.T) {
	ok := NewService("a")
	ok.Command = []string{"x"}
	st := &Stack{Name: "s", Order: []string{"a"}, Services: map[string]Service{"a": ok}}
	if err := st.Check(); err != nil {
		t.Fatal(err)
	}
	bad := ok
	bad.Name = "b"
	st.Services["a"] = bad
	if err := st.Check(); err == nil {
		t.Fatal("a service filed under another name passed")
	}
	st.Services["a"] = ok
	st.Services["z"] = ok
	if err := st.Check(); err == nil {
		t.Fatal("a service missing from the order passed")
	}
}
