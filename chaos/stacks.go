package chaos

import (
	"fmt"
	"strings"

	"github.com/engenho/engenho/chaos/invariant"
	"github.com/engenho/engenho/chaos/schedule"
)

// The campaign's stacks. Every process-driver service carries CHAOS_RUN
// in its environment, so the campaign finds its processes on the machine
// (orphans, stopped intents) by reading /proc/PID/environ.
//
// The ladders are short (100ms..1s instead of 1m..15m), the monitor
// window (a slot settling after a failure, SVC-13) 1s or less instead of
// 5s, and the step timeout 5s: a campaign injects hundreds of faults into the same few
// slots within minutes, and the ladder's long waits are proven by the
// unit tests on a fake clock (SUP-10), not here.
const ladderBlock = `    x-engenho:
      backoff: {immediate: 3, delays: [100ms, 200ms, 400ms], cap: 1s}
      stable: 5s
      step_timeout: 5s
      drain: 300ms
`

// Service names in the campaign's stacks, as schedules name them. The
// incus stack's real name carries the run id (see stackSet.real): an
// incusd is shared by the whole machine, and two campaigns must not see
// each other's containers.
const (
	svcWeb    = "shop/web"
	svcCache  = "shop/cache"
	svcWorker = "jobs/worker"
	svcBox    = "edge/box"
	edgeStack = "edge"
)

// stackSet is what the campaign deploys.
type stackSet struct {
	run     string // CHAOS_RUN marker
	webPort int    // the balancer port of shop/web
	boxPort int    // the balancer port of edge/box (incus)
	incus   bool
	// cgroups: shop/web gets a memory limit and its /alloc endpoint
	// (workload.oom).
	cgroups bool
	gen     int // bumped by each redeploy of shop/web (a new revision)
	webReps int // shop/web's replicas in the file
	// hbDir holds shop/cache's heartbeat files: its probe fails once the
	// workload stops touching its own (a dead or hung workload never
	// passes for a live one).
	hbDir string
}

// webMemory is shop/web's memory limit where the machine has cgroups.
const webMemory = "64M"

func (s stackSet) shop() string {
	oom := ""
	if s.cgroups {
		oom = `
      resources: {limits: {memory: ` + webMemory + `}}`
	}
	return fmt.Sprintf(`name: shop
services:
  web:
    command: ["${ENGENHO_BIN}", "demo-http"]
    env: {CHAOS_RUN: %q, CHAOS_GEN: "%d", DEMO_ALLOW_ALLOC: "1"}
    ports: ["127.0.0.1:%d:80"]
    healthcheck:
      http: {path: /healthz, port: 80}
      interval: 1s
      timeout: 1s
      retries: 2
      start_interval: 100ms
    deploy:
      replicas: %d
      update_config: {parallelism: 1, order: start-first, failure_action: pause, monitor: 500ms}%s
    stop_grace_period: 2s
%s  cache:
    command: ["/bin/sh", "-c", "trap 'exit 0' TERM; while :; do touch \"$$CHAOS_HB/$$ENGENHO_INSTANCE\"; sleep 1; done"]
    env: {CHAOS_RUN: %q, CHAOS_HB: %q}
    healthcheck:
      test: ["CMD", "/bin/sh", "-c", "test $$(( $$(date +%%s) - $$(stat -c %%Y \"$$CHAOS_HB/$$ENGENHO_INSTANCE\") )) -lt 3"]
      interval: 1s
      timeout: 1s
      retries: 2
      start_interval: 100ms
    deploy:
      update_config: {monitor: 1s}
    stop_grace_period: 1s
%s`, s.run, s.gen, s.webPort, s.webReps, oom, ladderBlock, s.run, s.hbDir, ladderBlock)
}

func (s stackSet) jobs() string {
	return fmt.Sprintf(`name: jobs
services:
  worker:
    command: ["/bin/sh", "-c", "trap 'exit 0' TERM; while :; do sleep 1; done"]
    env: {CHAOS_RUN: %q}
    deploy:
      update_config: {monitor: 1s}
    stop_grace_period: 1s
%s`, s.run, ladderBlock)
}

// incusStack is the real name of the incus stack.
func (s stackSet) incusStack() string { return edgeStack + "-" + s.run }

// owns reports whether stack is one of the campaign's.
func (s stackSet) owns(stack string) bool {
	return stack == "shop" || stack == "jobs" || stack == s.incusStack()
}

// real maps a schedule's service or stack name to the deployed one.
func (s stackSet) real(name string) string {
	if name == edgeStack || strings.HasPrefix(name, edgeStack+"/") {
		return s.incusStack() + strings.TrimPrefix(name, edgeStack)
	}
	return name
}

func (s stackSet) edge() string {
	return fmt.Sprintf(`name: `+s.incusStack()+`
services:
  box:
    driver: incus
    image: busybox
    command: ["sh", "-c", "mkdir -p /www && echo ok > /www/index.html && exec httpd -f -p 80 -h /www"]
    ports: ["127.0.0.1:%d:80"]
    healthcheck:
      http: {path: /, port: 80}
      interval: 1s
      timeout: 1s
      retries: 2
      start_interval: 200ms
    stop_grace_period: 2s
%s`, s.boxPort, ladderBlock)
}

// files lists the stack files to apply: name and content.
func (s stackSet) files() [][2]string {
	out := [][2]string{{"shop.yaml", s.shop()}, {"jobs.yaml", s.jobs()}}
	if s.incus {
		out = append(out, [2]string{"edge.yaml", s.edge()})
	}
	return out
}

// targets are the services faults and intents aim at.
func (s stackSet) targets() []schedule.Target {
	out := []schedule.Target{
		{Service: svcWeb, Driver: "process", MinReplicas: 2, MaxReplicas: 3, Rollout: true, Probe: true, MemoryLimit: s.cgroups},
		{Service: svcCache, Driver: "process", Probe: true},
		{Service: svcWorker, Driver: "process", Stoppable: true},
	}
	if s.incus {
		out = append(out, schedule.Target{Service: svcBox, Driver: "incus"})
	}
	return out
}

// want is the declared state right after the first apply.
func (s stackSet) want() invariant.Want {
	w := invariant.Want{Services: []invariant.ServiceWant{
		{Service: svcWeb, Replicas: s.webReps, Probe: true},
		{Service: svcCache, Replicas: 1, Probe: true},
		{Service: svcWorker, Replicas: 1},
	}}
	if s.incus {
		w.Services = append(w.Services, invariant.ServiceWant{Service: s.real(svcBox), Replicas: 1, Probe: true})
	}
	return w
}
