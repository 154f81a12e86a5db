package stackfile

import (
	"testing"
	"time"
)

// SVC-3: the revision of a fixed definition never changes between
// engenho versions by accident. If this fails, every instance on every
// node is replaced after the upgrade: change revisionFormat on purpose and
// say so in the release notes, or undo the change.
func TestRevisionGoldenSVC3(t *testing.T) {
	st := mustParse(t, "g.yaml", `services:
  api:
    command: ["/bin/api", "--port", "80"]
    env: {A: "1", PW: {value: s, secret: true}}
    ports: ["8080:80"]
    healthcheck:
      http: {path: /healthz}
`)
	if got, want := st.Services["api"].Revision(), "593f24616185"; got != want {
		t.Fatalf("revision %s, want %s (see the comment above)", got, want)
	}
}

// SVC-3: equal definitions, however written, have equal revisions:
// defaults written out or not, env as a map or a list, command as a
// string or a list or split into command + args, key order, CMD-SHELL
// versus its sh -c form, anchors.
func TestRevisionStableSVC3(t *testing.T) {
	variants := []string{
		`command: /bin/app -v
env: {A: "1", B: "2"}
healthcheck:
  test: ["CMD-SHELL", "check"]`,
		`env: [B=2, A=1]
command: ["/bin/app", "-v"]
healthcheck:
  test: check
  interval: 10s
  timeout: 5s
  retries: 3
  start_period: 0s
  start_interval: 2s`,
		`command: [/bin/app]
args: ["-v"]
healthcheck: {test: [CMD, /bin/sh, -c, check]}
env:
  B: "2"
  A: "1"
driver: process
deploy: {replicas: 1}`,
		`<<: {env: {A: "1", B: "2"}}
command: "'/bin/app' \"-v\""
healthcheck: {test: [CMD-SHELL, check], disable: false}`,
	}
	var first string
	for i, v := range variants {
		rev := mustParse(t, "v.yaml", stackYAML(v, false)).Services["api"].Revision()
		if i == 0 {
			first = rev
			continue
		}
		if rev != first {
			t.Errorf("variant %d: revision %s, want %s", i, rev, first)
		}
	}
	// Deterministic across runs over map iteration order.
	s := mustParse(t, "v.yaml", stackYAML(variants[0], false)).Services["api"]
	for range 50 {
		if s.Clone().Revision() != first {
			t.Fatal("revision depends on map order")
		}
	}
}

// SVC-3, SVC-4: what is in the revision (an update replaces instances)
// and what is not (scale and settings apply in place); the reasons are
// in revision.go.
func TestRevisionSensitivitySVC3SVC4(t *testing.T) {
	base := func() Service {
		s := NewService("api")
		s.Command = []string{"/bin/api"}
		s.Env = Env{"A": Plain("1"), "PW": Secret("s1")}
		s.Ports = []Port{{Target: 80, Published: 8080, HostIP: "0.0.0.0", Protocol: "tcp"}}
		s.Healthcheck.Kind, s.Healthcheck.Path, s.Healthcheck.Port = ProbeHTTP, "/", 80
		return s
	}
	changes := []struct {
		name    string
		change  func(*Service)
		changed bool
	}{
		{"command", func(s *Service) { s.Command = []string{"/bin/api2"} }, true},
		{"args", func(s *Service) { s.Args = []string{"-v"} }, true},
		{"image", func(s *Service) { s.Image = "x" }, true},
		{"env value", func(s *Service) { s.Env["A"] = Plain("2") }, true},
		{"env added", func(s *Service) { s.Env["B"] = Plain("") }, true},
		{"secret value rotated", func(s *Service) { s.Env["PW"] = Secret("s2") }, true},
		{"working_dir", func(s *Service) { s.WorkingDir = "/srv" }, true},
		{"user", func(s *Service) { s.User = "nobody" }, true},
		{"target port", func(s *Service) { s.Ports[0].Target = 81; s.Healthcheck.Port = 81 }, true},
		{"port added", func(s *Service) { s.Ports = append(s.Ports, Port{Target: 90, Protocol: "tcp"}) }, true},
		{"healthcheck path", func(s *Service) { s.Healthcheck.Path = "/healthz" }, true},
		{"healthcheck interval", func(s *Service) { s.Healthcheck.Interval = time.Second }, true},
		{"healthcheck kind", func(s *Service) { s.Healthcheck.Kind = ProbeTCP; s.Healthcheck.Path = "" }, true},
		{"healthcheck off", func(s *Service) { s.Healthcheck = defaultHealthcheck() }, true},
		{"cpus", func(s *Service) { s.Deploy.Resources.CPUs = 1 }, true},
		{"memory", func(s *Service) { s.Deploy.Resources.MemoryBytes = 1 << 20 }, true},
		{"driver", func(s *Service) { s.Driver = "incus" }, true},
		{"hibernates", func(s *Service) { h := defaultHibernate(); h.Host = "a.b"; s.Hibernate = &h }, true},

		{"replicas (a scale)", func(s *Service) { s.Deploy.Replicas = 5 }, false},
		{"published port", func(s *Service) { s.Ports[0].Published = 9090 }, false},
		{"host ip", func(s *Service) { s.Ports[0].HostIP = "127.0.0.1" }, false},
		{"update_config", func(s *Service) {
			s.Deploy.UpdateConfig = UpdateConfig{Parallelism: 0, Order: OrderStartFirst, FailureAction: FailureRollback}
		}, false},
		{"restart_policy", func(s *Service) { s.Deploy.RestartPolicy = RestartPolicy{Condition: RestartNone, MaxAttempts: 3} }, false},
		{"backoff", func(s *Service) { s.Engenho.Backoff = Backoff{Immediate: 1, Cap: time.Minute} }, false},
		{"stable window", func(s *Service) { s.Engenho.Stable = time.Minute }, false},
		{"step timeout", func(s *Service) { s.Engenho.StepTimeout = time.Minute }, false},
		{"thresholds", func(s *Service) { s.Engenho.UnhealthyThreshold = 5; s.Engenho.RestartsBeforeReplace = 1 }, false},
		{"drain", func(s *Service) { s.Engenho.Drain = 0 }, false},
		{"edge host", func(s *Service) { s.Engenho.Host = "api.example.com" }, false},
		{"stop_grace_period", func(s *Service) { s.StopGracePeriod = time.Minute }, false},
		{"depends_on", func(s *Service) { s.DependsOn = []Dependency{{Service: "db", Condition: ConditionStarted}} }, false},
		{"sidecars", func(s *Service) { s.Sidecars = []Sidecar{{Name: "x", Command: []string{"x"}}} }, false},
		{"secret flag only", func(s *Service) { s.Env["A"] = Secret("1") }, false},
		{"name", func(s *Service) { s.Name = "other" }, false},
	}
	ref := base().Revision()
	for _, c := range changes {
		s := base()
		c.change(&s)
		if got := s.Revision() != ref; got != c.changed {
			t.Errorf("%s: revision changed = %v, want %v", c.name, got, c.changed)
		}
	}
}

// Hibernate settings steer the activator and do not change the revision.
func TestRevisionIgnoresHibernateSettingsSVC3(t *testing.T) {
	s := NewService("a")
	s.Command = []string{"x"}
	h := defaultHibernate()
	h.Host = "a.b"
	s.Hibernate = &h
	ref := s.Revision()
	h2 := h
	h2.Host, h2.Idle, h2.Replication, h2.Seed = "c.d", time.Hour, ReplicationDaily, []string{"seed"}
	s.Hibernate = &h2
	if s.Revision() != ref {
		t.Fatal("hibernate settings changed the revision")
	}
}

// A sidecar has its own revision: its command and env, and what it
// inherits (service env, image, user, working dir), not its supervision
// knobs.
func TestSidecarRevision(t *testing.T) {
	s := NewService("a")
	s.Command = []string{"x"}
	sc := defaultSidecar()
	sc.Name, sc.Command = "job", []string{"job"}
	ref := s.SidecarRevision(sc)
	sc2 := sc
	sc2.AlwaysOn, sc2.MaxRun, sc2.StopGracePeriod = true, time.Hour, time.Second
	if s.SidecarRevision(sc2) != ref {
		t.Error("supervision knobs changed the sidecar revision")
	}
	sc2.Command = []string{"job", "-v"}
	if s.SidecarRevision(sc2) == ref {
		t.Error("a new command kept the sidecar revision")
	}
	s.Env = Env{"A": Plain("1")}
	if s.SidecarRevision(sc) == ref {
		t.Error("inherited env did not change the sidecar revision")
	}
}
