package stackfile

import (
	"context"
	"errors"
	"io"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/engenho/engenho/drivers"
)

// recordingDriver is a drivers.Driver that records every call. Its
// Validate refuses a spec whose program is not in have; every other
// method fails the test, because validation must not touch instances.
type recordingDriver struct {
	t     *testing.T
	name  string
	have  map[string]bool
	echo  bool // refusal messages repeat the spec's env (a careless driver)
	mu    sync.Mutex
	specs []drivers.Spec
}

func (d *recordingDriver) Name() string { return d.name }

func (d *recordingDriver) Validate(_ context.Context, spec drivers.Spec) error {
	d.mu.Lock()
	d.specs = append(d.specs, spec)
	d.mu.Unlock()
	if len(spec.Command) == 0 || !d.have[spec.Command[0]] {
		prog := ""
		if len(spec.Command) > 0 {
			prog = spec.Command[0]
		}
		if d.echo {
			return drivers.Errorf(d.name, "validate", spec.Name, drivers.ErrInvalid, "command %q not found (env %v)", prog, spec.Env)
		}
		return drivers.Errorf(d.name, "validate", spec.Name, drivers.ErrInvalid, "command %q not found", prog)
	}
	return nil
}

func (d *recordingDriver) forbidden(op string) error {
	d.t.Errorf("validation called driver %s %s: it must change nothing", d.name, op)
	return errors.New("forbidden")
}
func (d *recordingDriver) Create(context.Context, drivers.Spec) error { return d.forbidden("Create") }
func (d *recordingDriver) Start(context.Context, string) error        { return d.forbidden("Start") }
func (d *recordingDriver) Stop(context.Context, string, time.Duration) error {
	return d.forbidden("Stop")
}
func (d *recordingDriver) Kill(context.Context, string) error   { return d.forbidden("Kill") }
func (d *recordingDriver) Delete(context.Context, string) error { return d.forbidden("Delete") }
func (d *recordingDriver) Inspect(context.Context, string) (drivers.Status, error) {
	return drivers.Status{}, d.forbidden("Inspect")
}
func (d *recordingDriver) Exec(context.Context, string, []string) (drivers.ExecResult, error) {
	return drivers.ExecResult{}, d.forbidden("Exec")
}
func (d *recordingDriver) Logs(context.Context, string, drivers.LogOptions) (io.ReadCloser, error) {
	return nil, d.forbidden("Logs")
}
func (d *recordingDriver) List(context.Context, drivers.Labels) ([]drivers.Status, error) {
	return nil, d.forbidden("List")
}
func (d *recordingDriver) Watch(string, func(drivers.Exit)) (func(), error) {
	return nil, d.forbidden("Watch")
}
func (d *recordingDriver) Usage(context.Context, string) (drivers.Usage, error) {
	return drivers.Usage{}, d.forbidden("Usage")
}

type claim struct{ stack, service string }

// fakeNode answers from maps.
type fakeNode struct {
	drivers map[string]drivers.Driver
	ports   map[int]claim
	busy    map[int]bool
	hosts   map[string]claim
	asked   []int // ports PortFree was asked about
}

func (n *fakeNode) Driver(name string) (drivers.Driver, bool) { d, ok := n.drivers[name]; return d, ok }
func (n *fakeNode) PortClaimedBy(port int) (string, string, bool) {
	c, ok := n.ports[port]
	return c.stack, c.service, ok
}
func (n *fakeNode) PortFree(_ string, port int) bool {
	n.asked = append(n.asked, port)
	return !n.busy[port]
}
func (n *fakeNode) HostClaimedBy(host string) (string, string, bool) {
	c, ok := n.hosts[host]
	return c.stack, c.service, ok
}
func (n *fakeNode) Bin() string { return "/usr/bin/engenho" }

func newFakeNode(t *testing.T) (*fakeNode, *recordingDriver) {
	d := &recordingDriver{t: t, name: "process", have: map[string]bool{"/bin/web": true, "/usr/bin/engenho": true, "/bin/job": true}}
	return &fakeNode{
		drivers: map[string]drivers.Driver{"process": d},
		ports:   map[int]claim{},
		busy:    map[int]bool{},
		hosts:   map[string]claim{},
	}, d
}

const validStack = `name: shop
services:
  web:
    command: ["/bin/web"]
    env: {PW: {value: hunter2-secret, secret: true}}
    ports: ["8080:80"]
    x-engenho: {host: shop.example.com}
  demo:
    command: ["${ENGENHO_BIN}", "demo-http"]
    sidecars:
      - {name: job, command: [/bin/job]}
`

// SVC-2: a stack whose every service resolves passes; the driver saw the
// same spec the actors will create (InstanceSpec), ${ENGENHO_BIN}
// resolved, secrets withheld, and was asked nothing but Validate.
func TestValidateAcceptsSVC2(t *testing.T) {
	node, drv := newFakeNode(t)
	st := mustParse(t, "shop.yaml", validStack)
	if err := Validate(context.Background(), st, node); err != nil {
		t.Fatal(err)
	}
	if len(drv.specs) != 3 {
		t.Fatalf("driver validated %d specs, want 3 (web, demo, demo's sidecar)", len(drv.specs))
	}
	web := drv.specs[0]
	if web.Name != "shop-web-1-validate" || web.Labels[drivers.LabelService] != "web" || web.Labels[drivers.LabelRevision] == "" {
		t.Errorf("web spec %s %v", web.Name, web.Labels)
	}
	if strings.Contains(web.Env["PW"], "hunter2") {
		t.Error("SEC-2: the driver was shown a secret value during validation")
	}
	if got := drv.specs[1].Command; !reflect.DeepEqual(got, []string{"/usr/bin/engenho", "demo-http"}) {
		t.Errorf("demo command %v, want ${ENGENHO_BIN} resolved", got)
	}
	if got := drv.specs[2].Labels[LabelSidecar]; got != "job" {
		t.Errorf("sidecar spec labels %v", drv.specs[2].Labels)
	}
	if !reflect.DeepEqual(node.asked, []int{8080}) {
		t.Errorf("PortFree asked about %v, want [8080]", node.asked)
	}
}

// SVC-2: every way a stack can fail to resolve, each named by stack,
// service and key, with its kind findable by errors.Is.
func TestValidateRefusesSVC2(t *testing.T) {
	cases := []struct {
		name  string
		setup func(n *fakeNode, d *recordingDriver)
		src   string
		key   string
		kind  error
		msg   string
	}{
		{"driver missing", nil, "name: s\nservices:\n  a: {image: busybox, driver: incus}\n",
			"services.a.driver", ErrDriverMissing, `driver "incus" is not available`},
		{"command missing (driver's Validate refuses)", nil, "name: s\nservices:\n  a: {command: [/bin/nope]}\n",
			"services.a", drivers.ErrInvalid, `command "/bin/nope" not found`},
		{"sidecar command missing", nil, "name: s\nservices:\n  a:\n    command: [/bin/web]\n    sidecars: [{name: j, command: [/bin/nope]}]\n",
			"services.a.sidecars[0]", ErrDriverRefused, "refused sidecar j"},
		{"port claimed by another stack", func(n *fakeNode, _ *recordingDriver) { n.ports[8080] = claim{"other", "front"} },
			"name: s\nservices:\n  a: {command: [/bin/web], ports: [\"8080:80\"]}\n",
			"services.a.ports[0]", ErrPortClaimed, "port 8080 is published by stack other service front"},
		{"port busy", func(n *fakeNode, _ *recordingDriver) { n.busy[8080] = true },
			"name: s\nservices:\n  a: {command: [/bin/web], ports: [\"127.0.0.1:8080:80\"]}\n",
			"services.a.ports[0]", ErrPortBusy, "port 8080 is in use on this node (127.0.0.1:8080)"},
		{"host claimed by another stack", func(n *fakeNode, _ *recordingDriver) { n.hosts["a.example.com"] = claim{"other", "x"} },
			"name: s\nservices:\n  a: {command: [/bin/web], x-engenho: {host: a.example.com}}\n",
			"services.a.x-engenho.host", ErrHostClaimed, "host a.example.com belongs to stack other service x"},
		{"hibernate host claimed", func(n *fakeNode, _ *recordingDriver) { n.hosts["a.example.com"] = claim{"other", "x"} },
			"name: s\nservices:\n  a: {command: [/bin/web], ports: [\"80\"], hibernate: {host: a.example.com}}\n",
			"services.a.hibernate.host", ErrHostClaimed, "belongs to stack other"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			node, drv := newFakeNode(t)
			if tc.setup != nil {
				tc.setup(node, drv)
			}
			st := mustParse(t, "s.yaml", tc.src)
			err := Validate(context.Background(), st, node)
			var ve *ValidationError
			if !errors.As(err, &ve) {
				t.Fatalf("want *ValidationError, got %T %v", err, err)
			}
			if ve.Stack != "s" || len(ve.Problems) != 1 {
				t.Fatalf("stack %q problems %d: %v", ve.Stack, len(ve.Problems), err)
			}
			p := ve.Problems[0]
			if p.Key != tc.key || !errors.Is(err, tc.kind) || !strings.Contains(p.Msg, tc.msg) {
				t.Errorf("got %q (%v), want key %s kind %v msg %q", p.String(), p.Err, tc.key, tc.kind, tc.msg)
			}
			if p.File != "s.yaml" || p.Line < 2 {
				t.Errorf("not located in the file: %s", p.String())
			}
			if !strings.HasPrefix(err.Error(), "stack s refused: s.yaml:") {
				t.Errorf("message %q", err.Error())
			}
		})
	}
}

// SVC-2: a port or host the same stack already holds is fine: re-applying
// a stack re-targets its own balancer listener (PortFree is not asked).
func TestValidateOwnClaimsSVC2(t *testing.T) {
	node, _ := newFakeNode(t)
	node.ports[8080] = claim{"shop", "other-service"}
	node.busy[8080] = true // our own balancer listens there
	node.hosts["shop.example.com"] = claim{"shop", "web"}
	if err := Validate(context.Background(), mustParse(t, "shop.yaml", validStack), node); err != nil {
		t.Fatal(err)
	}
	if len(node.asked) != 0 {
		t.Errorf("asked PortFree about a port the stack holds: %v", node.asked)
	}
}

// SVC-2: every problem at once, across services.
func TestValidateCollectsAllSVC2(t *testing.T) {
	node, _ := newFakeNode(t)
	node.busy[9000] = true
	st := mustParse(t, "s.yaml", "name: s\nservices:\n  a: {command: [/bin/nope]}\n  b: {image: x, driver: incus}\n  c: {command: [/bin/web], ports: [\"9000:1\"]}\n")
	err := Validate(context.Background(), st, node)
	var ve *ValidationError
	if !errors.As(err, &ve) || len(ve.Problems) != 3 {
		t.Fatalf("want 3 problems: %v", err)
	}
	for _, kind := range []error{ErrDriverRefused, ErrDriverMissing, ErrPortBusy, drivers.ErrInvalid} {
		if !errors.Is(err, kind) {
			t.Errorf("errors.Is(%v) false", kind)
		}
	}
}

// SVC-2: a dependency cycle (in a stack built in code, or read back from a
// journal) is refused before the node is asked anything.
func TestValidateCycleSVC2(t *testing.T) {
	node, drv := newFakeNode(t)
	a, b := NewService("a"), NewService("b")
	a.Command, b.Command = []string{"/bin/web"}, []string{"/bin/web"}
	a.DependsOn = []Dependency{{Service: "b", Condition: ConditionStarted}}
	b.DependsOn = []Dependency{{Service: "a", Condition: ConditionStarted}}
	st := &Stack{Name: "s", Order: []string{"a", "b"}, Services: map[string]Service{"a": a, "b": b}}
	err := Validate(context.Background(), st, node)
	if !errors.Is(err, ErrDependency) || !strings.Contains(err.Error(), "dependency cycle: a → b → a") {
		t.Fatalf("got %v", err)
	}
	if len(drv.specs) != 0 {
		t.Error("the driver was asked about a stack that is not well formed")
	}
}

// SEC-2: a driver that repeats the spec in its error still cannot leak a
// secret through Validate: it was never shown one, and any that shows is
// scrubbed.
func TestValidateNeverLeaksSecretsSEC2(t *testing.T) {
	node, drv := newFakeNode(t)
	drv.echo = true
	st := mustParse(t, "s.yaml", "name: s\nservices:\n  a:\n    command: [/bin/nope]\n    env: {PW: {value: hunter2-secret, secret: true}}\n")
	err := Validate(context.Background(), st, node)
	if err == nil || strings.Contains(err.Error(), "hunter2") {
		t.Fatalf("error shows the secret or is nil: %v", err)
	}
	// And the scrubber itself: a message holding the real value.
	leaky := errors.New("cannot run: PW=hunter2-secret")
	if got := scrub(leaky, []string{"hunter2-secret"}); strings.Contains(got.Error(), "hunter2") || !errors.Is(got, leaky) {
		t.Fatalf("scrub: %v", got)
	}
}

// The example stacks validate on a node that has what they need.
func TestValidateExamples(t *testing.T) {
	for _, f := range exampleFiles {
		st, err := ParseFile("../../configs/stacks/" + f)
		if err != nil {
			t.Fatal(err)
		}
		node, drv := newFakeNode(t)
		drv.have = map[string]bool{}
		for _, svc := range st.List() {
			if argv := svc.Argv(); len(argv) > 0 {
				drv.have[strings.ReplaceAll(argv[0], "${ENGENHO_BIN}", node.Bin())] = true
			}
			for _, sc := range svc.Sidecars {
				drv.have[strings.ReplaceAll(sc.Command[0], "${ENGENHO_BIN}", node.Bin())] = true
			}
		}
		if err := Validate(context.Background(), st, node); err != nil {
			t.Errorf("%s: %v", f, err)
		}
	}
}
