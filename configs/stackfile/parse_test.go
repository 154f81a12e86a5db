package stackfile

import (
	"errors"
	"strings"
	"testing"
	"time"
)

// others are services for depends_on to name; every case has them.
const others = "  db:\n    command: db\n    healthcheck: {test: [CMD, x]}\n  cache:\n    command: c\n  q:\n    command: q\n"

// SVC-1: every key of the format, written every way it may be written,
// lands in the typed Service with everything else at its default.
func TestParseEveryKeySVC1(t *testing.T) {
	cases := []struct {
		name string
		body string
		cmd  bool // prepend command: run
		want func(*Service)
	}{
		{"command string is split like a shell", `command: /bin/app --name "two words" 'it''s' a\ b`, false,
			func(s *Service) { s.Command = []string{"/bin/app", "--name", "two words", "its", "a b"} }},
		{"command list", `command: ["/bin/app", "-v"]`, false,
			func(s *Service) { s.Command = []string{"/bin/app", "-v"} }},
		{"command with engenho variables", `command: ["${ENGENHO_BIN}", "demo-http", "--slot=${ENGENHO_SLOT}"]`, false,
			func(s *Service) { s.Command = []string{"${ENGENHO_BIN}", "demo-http", "--slot=${ENGENHO_SLOT}"} }},
		{"$$ leaves ${} for the shell", `command: ["sh", "-c", "echo $${HOME} $1"]`, false,
			func(s *Service) { s.Command = []string{"sh", "-c", "echo ${HOME} $1"} }},
		{"args", "args: [--port, 80, true]", true,
			func(s *Service) { s.Args = []string{"--port", "80", "true"} }},
		{"image alone", "image: busybox", false,
			func(s *Service) { s.Command = nil; s.Image = "busybox" }},
		{"image and command", "image: debian/12\ncommand: [sleep, infinity]", false,
			func(s *Service) { s.Image = "debian/12"; s.Command = []string{"sleep", "infinity"} }},
		{"env map, scalars as written", "env:\n  A: x\n  NUM: 0800\n  ON: true\n  EMPTY: \"\"", true,
			func(s *Service) {
				s.Env = Env{"A": Plain("x"), "NUM": Plain("0800"), "ON": Plain("true"), "EMPTY": Plain("")}
			}},
		{"env list", "env: [A=x, B=, C=a=b]", true,
			func(s *Service) { s.Env = Env{"A": Plain("x"), "B": Plain(""), "C": Plain("a=b")} }},
		{"env secret value object", "env:\n  PW: {value: hunter2, secret: true}\n  NOT: {value: x}", true,
			func(s *Service) { s.Env = Env{"PW": Secret("hunter2"), "NOT": Plain("x")} }},
		{"env secret by x-engenho.secret_env", "env: [PW=hunter2, A=x]\nx-engenho: {secret_env: [PW]}", true,
			func(s *Service) { s.Env = Env{"PW": Secret("hunter2"), "A": Plain("x")} }},
		{"working_dir", "working_dir: /srv/app", true,
			func(s *Service) { s.WorkingDir = "/srv/app" }},
		{"user name", "user: www-data", true, func(s *Service) { s.User = "www-data" }},
		{"user uid:gid", "user: 1000:1000", true, func(s *Service) { s.User = "1000:1000" }},
		{"user number", "user: 1000", true, func(s *Service) { s.User = "1000" }},
		{"ports short forms", `ports: ["8080:80", "127.0.0.1:9090:90/tcp", "70", 60, "[::1]:5050:50"]`, true,
			func(s *Service) {
				s.Ports = []Port{
					{Target: 80, Published: 8080, HostIP: "0.0.0.0", Protocol: "tcp"},
					{Target: 90, Published: 9090, HostIP: "127.0.0.1", Protocol: "tcp"},
					{Target: 70, Protocol: "tcp"},
					{Target: 60, Protocol: "tcp"},
					{Target: 50, Published: 5050, HostIP: "::1", Protocol: "tcp"},
				}
			}},
		{"ports long form", "ports:\n  - {target: 80, published: \"8080\", host_ip: 127.0.0.1, protocol: tcp}\n  - target: 81\n    published: 8181\n  - target: 82", true,
			func(s *Service) {
				s.Ports = []Port{
					{Target: 80, Published: 8080, HostIP: "127.0.0.1", Protocol: "tcp"},
					{Target: 81, Published: 8181, HostIP: "0.0.0.0", Protocol: "tcp"},
					{Target: 82, Protocol: "tcp"},
				}
			}},
		{"healthcheck CMD", "healthcheck:\n  test: [CMD, /bin/check, -q]", true,
			func(s *Service) { s.Healthcheck.Kind = ProbeExec; s.Healthcheck.Exec = []string{"/bin/check", "-q"} }},
		{"healthcheck CMD-SHELL", "healthcheck:\n  test: [CMD-SHELL, \"curl -f localhost || exit 1\"]", true,
			func(s *Service) {
				s.Healthcheck.Kind = ProbeExec
				s.Healthcheck.Exec = []string{"/bin/sh", "-c", "curl -f localhost || exit 1"}
			}},
		{"healthcheck test string is CMD-SHELL", "healthcheck:\n  test: pg_isready", true,
			func(s *Service) {
				s.Healthcheck.Kind = ProbeExec
				s.Healthcheck.Exec = []string{"/bin/sh", "-c", "pg_isready"}
			}},
		{"healthcheck NONE", "healthcheck:\n  test: NONE", true, nil},
		{"healthcheck [NONE]", "healthcheck:\n  test: [NONE]", true, nil},
		{"healthcheck disable wins", "healthcheck:\n  test: [CMD, x]\n  disable: true", true, nil},
		{"healthcheck http with port and path", "ports: [\"80\", \"81\"]\nhealthcheck:\n  http: {path: /healthz, port: 81}", true,
			func(s *Service) {
				s.Ports = []Port{{Target: 80, Protocol: "tcp"}, {Target: 81, Protocol: "tcp"}}
				s.Healthcheck.Kind, s.Healthcheck.Path, s.Healthcheck.Port = ProbeHTTP, "/healthz", 81
			}},
		{"healthcheck http defaults: path / and the first port", "ports: [\"80\"]\nhealthcheck:\n  http: {}", true,
			func(s *Service) {
				s.Ports = []Port{{Target: 80, Protocol: "tcp"}}
				s.Healthcheck.Kind, s.Healthcheck.Path, s.Healthcheck.Port = ProbeHTTP, "/", 80
			}},
		{"healthcheck tcp", "ports: [\"5432\"]\nhealthcheck:\n  tcp: {port: 5432}", true,
			func(s *Service) {
				s.Ports = []Port{{Target: 5432, Protocol: "tcp"}}
				s.Healthcheck.Kind, s.Healthcheck.Port = ProbeTCP, 5432
			}},
		{"healthcheck timing", "healthcheck:\n  test: [CMD, x]\n  interval: 1m30s\n  timeout: 3s\n  retries: 5\n  start_period: 40s\n  start_interval: 500ms", true,
			func(s *Service) {
				s.Healthcheck = Healthcheck{Kind: ProbeExec, Exec: []string{"x"}, Interval: 90 * time.Second, Timeout: 3 * time.Second,
					Retries: 5, StartPeriod: 40 * time.Second, StartInterval: 500 * time.Millisecond}
			}},
		{"depends_on list", "depends_on: [db]", true,
			func(s *Service) { s.DependsOn = []Dependency{{Service: "db", Condition: ConditionStarted}} }},
		{"depends_on map", "depends_on:\n  db: {condition: service_healthy}\n  cache:\n  q: {}", true,
			func(s *Service) {
				s.DependsOn = []Dependency{{Service: "db", Condition: ConditionHealthy}, {Service: "cache", Condition: ConditionStarted}, {Service: "q", Condition: ConditionStarted}}
			}},
		{"deploy.replicas", "deploy: {replicas: 3}", true, func(s *Service) { s.Deploy.Replicas = 3 }},
		{"deploy.replicas 0", "deploy: {replicas: 0}", true, func(s *Service) { s.Deploy.Replicas = 0 }},
		{"deploy.restart_policy", "deploy:\n  restart_policy: {condition: on-failure, max_attempts: 5, window: 2m, delay: 5s}", true,
			func(s *Service) {
				s.Deploy.RestartPolicy = RestartPolicy{Condition: RestartOnFailure, MaxAttempts: 5, Window: 2 * time.Minute, Delay: 5 * time.Second}
			}},
		{"deploy.restart_policy none", "deploy:\n  restart_policy: {condition: none}", true,
			func(s *Service) { s.Deploy.RestartPolicy.Condition = RestartNone }},
		{"deploy.update_config", "deploy:\n  update_config: {parallelism: 0, delay: 10s, order: start-first, failure_action: rollback, monitor: 30s}", true,
			func(s *Service) {
				s.Deploy.UpdateConfig = UpdateConfig{Parallelism: 0, Delay: 10 * time.Second, Order: OrderStartFirst, FailureAction: FailureRollback, Monitor: 30 * time.Second}
			}},
		{"deploy.update_config continue", "deploy:\n  update_config: {failure_action: continue}", true,
			func(s *Service) { s.Deploy.UpdateConfig.FailureAction = FailureContinue }},
		{"deploy.resources", "deploy:\n  resources:\n    limits: {cpus: \"0.5\", memory: 512m}", true,
			func(s *Service) { s.Deploy.Resources = Resources{CPUs: 0.5, MemoryBytes: 512 << 20} }},
		{"deploy.resources units", "deploy:\n  resources:\n    limits: {cpus: 2, memory: 1GiB}", true,
			func(s *Service) { s.Deploy.Resources = Resources{CPUs: 2, MemoryBytes: 1 << 30} }},
		{"deploy.resources bytes", "deploy:\n  resources:\n    limits: {memory: 67108864}", true,
			func(s *Service) { s.Deploy.Resources = Resources{MemoryBytes: 64 << 20} }},
		// DRV-13: pids, the memory reservation and the service-level keys.
		{"deploy.resources pids and reservation", "deploy:\n  resources:\n    limits: {cpus: 0.25, memory: 256M, pids: 50}\n    reservations: {memory: 128M}", true,
			func(s *Service) {
				s.Deploy.Resources = Resources{CPUs: 0.25, MemoryBytes: 256 << 20, Pids: 50, MemoryReservationBytes: 128 << 20}
			}},
		{"deploy.resources pids unlimited", "deploy:\n  resources:\n    limits: {pids: -1}", true, func(s *Service) {}},
		{"service-level resource keys", "mem_limit: 64m\nmem_reservation: 32m\ncpus: \"0.5\"\npids_limit: 100", true,
			func(s *Service) {
				s.Deploy.Resources = Resources{CPUs: 0.5, MemoryBytes: 64 << 20, MemoryReservationBytes: 32 << 20, Pids: 100}
			}},
		{"service-level and deploy agree", "mem_limit: 64m\ndeploy:\n  resources:\n    limits: {memory: 64m, cpus: 1}", true,
			func(s *Service) { s.Deploy.Resources = Resources{CPUs: 1, MemoryBytes: 64 << 20} }},
		{"driver", "driver: incus\nimage: busybox", false,
			func(s *Service) { s.Command = nil; s.Driver = "incus"; s.Image = "busybox" }},
		{"hibernate", "ports: [\"80\"]\nhibernate:\n  host: notes.example.com\n  idle: 5m\n  seed: [/bin/app, init]\n  replication: stream\n  data_dir: /var/lib/notes\n  wake_timeout: 10s", true,
			func(s *Service) {
				s.Ports = []Port{{Target: 80, Protocol: "tcp"}}
				s.Hibernate = &Hibernate{Host: "notes.example.com", Idle: 5 * time.Minute, Seed: []string{"/bin/app", "init"},
					Replication: ReplicationStream, DataDir: "/var/lib/notes", Port: 80, WakeTimeout: 10 * time.Second}
				s.StopGracePeriod = DefaultHibernatedGrace
			}},
		{"hibernate defaults", "ports: [\"80\", \"81\"]\nhibernate: {host: notes.localhost, port: 81}\nstop_grace_period: 3s", true,
			func(s *Service) {
				s.Ports = []Port{{Target: 80, Protocol: "tcp"}, {Target: 81, Protocol: "tcp"}}
				s.Hibernate = &Hibernate{Host: "notes.localhost", Idle: DefaultIdle, Replication: ReplicationBatched, Port: 81, WakeTimeout: DefaultWakeTimeout}
				s.StopGracePeriod = 3 * time.Second
			}},
		{"sidecars", "sidecars:\n  - name: backup\n    command: /bin/backup --loop\n    env: {B: x}\n    working_dir: /tmp\n    always_on: true\n    max_run: 1h\n    stop_grace_period: 1s\n    backoff: {initial: 1s, cap: 30s, reset_after: 2m}\n  - {name: tick, command: [tick]}", true,
			func(s *Service) {
				s.Sidecars = []Sidecar{
					{Name: "backup", Command: []string{"/bin/backup", "--loop"}, Env: Env{"B": Plain("x")}, WorkingDir: "/tmp",
						AlwaysOn: true, MaxRun: time.Hour, StopGracePeriod: time.Second,
						Backoff: SidecarBackoff{Initial: time.Second, Cap: 30 * time.Second, ResetAfter: 2 * time.Minute}},
					{Name: "tick", Command: []string{"tick"}, StopGracePeriod: DefaultSidecarGrace,
						Backoff: SidecarBackoff{Initial: DefaultSidecarInitial, Cap: DefaultSidecarCap, ResetAfter: DefaultSidecarResetAfter}},
				}
			}},
		{"standalone worker: sidecars only", "sidecars:\n  - {name: job, command: [job]}", false,
			func(s *Service) {
				s.Command = nil
				s.Sidecars = []Sidecar{{Name: "job", Command: []string{"job"}, StopGracePeriod: DefaultSidecarGrace,
					Backoff: SidecarBackoff{Initial: DefaultSidecarInitial, Cap: DefaultSidecarCap, ResetAfter: DefaultSidecarResetAfter}}}
			}},
		{"secret_env reaches sidecar env", "sidecars:\n  - {name: job, command: [job], env: [TOKEN=t]}\nx-engenho: {secret_env: [TOKEN]}", true,
			func(s *Service) {
				s.Sidecars = []Sidecar{{Name: "job", Command: []string{"job"}, Env: Env{"TOKEN": Secret("t")}, StopGracePeriod: DefaultSidecarGrace,
					Backoff: SidecarBackoff{Initial: DefaultSidecarInitial, Cap: DefaultSidecarCap, ResetAfter: DefaultSidecarResetAfter}}}
			}},
		{"stop_grace_period", "stop_grace_period: 1m", true, func(s *Service) { s.StopGracePeriod = time.Minute }},
		{"stop_grace_period 0", "stop_grace_period: 0s", true, func(s *Service) { s.StopGracePeriod = 0 }},
		{"x-engenho knobs", "x-engenho:\n  backoff: {immediate: 1, delays: [10s, 20s], cap: 1m, jitter: 0.1}\n  stable: 1m\n  step_timeout: 30s\n  unhealthy_threshold: 4\n  restarts_before_replace: 2\n  drain: 0s\n  unhealthy_event_after: 1m\n  host: api.example.com", true,
			func(s *Service) {
				s.Engenho = Engenho{
					Backoff:               Backoff{Immediate: 1, Delays: []time.Duration{10 * time.Second, 20 * time.Second}, Cap: time.Minute, Jitter: 0.1, Declared: true},
					Stable:                time.Minute,
					StepTimeout:           30 * time.Second,
					UnhealthyThreshold:    4,
					RestartsBeforeReplace: 2,
					Drain:                 0,
					UnhealthyEventAfter:   time.Minute,
					Host:                  "api.example.com",
					Secrets:               SecretsPolicy{OnChange: OnChangeRestart},
				}
			}},
		{"x-engenho backoff: empty delays go straight to the cap", "x-engenho:\n  backoff: {immediate: 0, delays: []}", true,
			func(s *Service) {
				s.Engenho.Backoff.Immediate = 0
				s.Engenho.Backoff.Delays = []time.Duration{}
				s.Engenho.Backoff.Declared = true
			}},
		{"x-* keys in a service are ignored", "x-note: anything\nx-anchor: &a {b: c}", true, nil},
		{"merge keys from an x- anchor", "<<: {stop_grace_period: 7s, env: {A: merged}}\nenv: {A: own}", true,
			func(s *Service) { s.StopGracePeriod = 7 * time.Second; s.Env = Env{"A": Plain("own")} }},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			st := mustParse(t, "t.yaml", stackYAML(tc.body, tc.cmd)+others)
			sameService(t, st.Services["api"], wantService(apiRun, tc.want))
		})
	}
}

// SVC-1: the top level: name, version, x-* keys, anchors.
func TestParseTopLevelSVC1(t *testing.T) {
	src := `
version: "3.9"
x-common: &common
  stop_grace_period: 3s
  env: {SHARED: "1"}
services:
  a:
    <<: *common
    command: a
  b:
    <<: *common
    command: b
    stop_grace_period: 4s
`
	st := mustParse(t, "/etc/stacks/shop.yml", src)
	if st.Name != "shop" || st.Source != "/etc/stacks/shop.yml" {
		t.Fatalf("name %q source %q, want shop from the file name", st.Name, st.Source)
	}
	if got := strings.Join(st.Order, ","); got != "a,b" {
		t.Fatalf("order %s, want a,b", got)
	}
	if a := st.Services["a"]; a.StopGracePeriod != 3*time.Second || a.Env["SHARED"].Reveal() != "1" {
		t.Fatalf("merged anchor not applied to a: %v %v", a.StopGracePeriod, a.Env)
	}
	if b := st.Services["b"]; b.StopGracePeriod != 4*time.Second {
		t.Fatalf("explicit key must win over merged: %v", b.StopGracePeriod)
	}
}

// SVC-1: the stack name comes from `name`, else the caller, else the file.
func TestParseStackNameSVC1(t *testing.T) {
	body := "services:\n  a:\n    command: a\n"
	cases := []struct {
		file, src, given, want string
		bad                    bool
	}{
		{file: "web.yaml", src: body, want: "web"},
		{file: "dir/web.yml", src: body, want: "web"},
		{file: "web.json", src: body, want: "web"},
		{file: "web.yaml", src: "name: shop\n" + body, want: "shop"},
		{file: "web.yaml", src: body, given: "given", want: "given"},
		{file: "web.yaml", src: "name: shop\n" + body, given: "shop", want: "shop"},
		{file: "web.yaml", src: "name: shop\n" + body, given: "other", bad: true},
		{file: "My Stack.yaml", src: body, bad: true},
		{file: "../../etc.yaml", src: "name: ../etc\n" + body, bad: true},
		{file: "web.yaml", src: body, given: "../x", bad: true},
	}
	for _, tc := range cases {
		st, err := ParseWith(tc.file, []byte(tc.src), Options{Name: tc.given})
		if tc.bad {
			if err == nil {
				t.Errorf("%s given %q: accepted as %q", tc.file, tc.given, st.Name)
			} else if !errors.Is(err, ErrValue) && !errors.Is(err, ErrMissing) {
				t.Errorf("%s: error kind: %v", tc.file, err)
			}
			continue
		}
		if err != nil {
			t.Errorf("%s given %q: %v", tc.file, tc.given, err)
		} else if st.Name != tc.want {
			t.Errorf("%s given %q: name %q, want %q", tc.file, tc.given, st.Name, tc.want)
		}
	}
}

func TestParseFile(t *testing.T) {
	st, err := ParseFile("../../configs/stacks/demo.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if st.Name != "demo" {
		t.Fatalf("name %q", st.Name)
	}
	if _, err := ParseFile("testdata/does-not-exist.yaml"); err == nil {
		t.Fatal("missing file accepted")
	}
}
