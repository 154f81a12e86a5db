# engenho: build, run the demo, test, measure.
#
#   make run     the daemon on the demo config (process driver, fs store)
#   make test    every test, with the race detector
#   make bench   the benchmark tables (PERF-1..PERF-7)
#   make chaos   the CI chaos campaign (on the chaos build); make soak a long one
#   make fuzz    every fuzz target for a fixed time
#   make lint    go vet (both builds), gofmt, go mod tidy, no chaos code in the shipped binary
#
# The shipped binary has no fault injection; the chaos build
# (go build -tags chaos) adds it and the `engenho chaos` commands.

GO        ?= go
BIN       := cmd/engenho/engenho
CHAOS_BIN := cmd/engenho/engenho-chaos
FUZZTIME  ?= 20s
# Minimizing a new input may take the fuzzer up to a minute (its default),
# longer than the whole FUZZTIME: keep it short so the time is spent fuzzing.
FUZZMIN   ?= 2s
BENCHTIME ?= 1x
export GOFLAGS := -buildvcs=false

.PHONY: build build-chaos run test bench chaos chaos-selftest soak fuzz lint clean

# staticcheck's defaults (unused code, values computed and never read,
# misused APIs) less three style checks that fight this tree's names: S1016
# (convert instead of a struct literal), ST1005 (an error may start with a
# method name), ST1008 (parseDuration returns an error kind before its text).
STATICCHECK := honnef.co/go/tools/cmd/staticcheck@v0.8.2
STATICCHECK_CHECKS := inherit,-S1016,-ST1005,-ST1008

LDFLAGS := -ldflags "-X main.version=$$(git describe --always --dirty 2>/dev/null || echo dev)"

build:
	$(GO) build $(LDFLAGS) -o $(BIN) ./cmd/engenho

build-chaos:
	$(GO) build -tags chaos $(LDFLAGS) -o $(CHAOS_BIN) ./cmd/engenho

run: build
	$(BIN) daemon --config configs/demo.yaml

test:
	$(GO) test -race -count=1 -timeout 30m ./...

bench: build
	@echo "== PERF-2 messaging, spawn/stop and memory per idle actor"
	$(GO) test -run '^$$' -bench . -benchtime $(BENCHTIME) ./actors/supervise/
	@echo "== PERF-1 restart latency: SIGKILL to the replacement's first instruction, as a ratio to a fork+exec loop in the same run (target p50 <= 1.2x, p99 <= 1.5x): the process driver alone, the whole tree, a real daemon"
	$(GO) test -run '^$$' -bench RestartLatency -benchtime 200x ./drivers/process/ ./actors/internal/treetest/
	$(GO) test -run '^$$' -bench PERF1RestartLatency -benchtime 200x -timeout 30m ./runtime/daemon/
	@echo "== PERF-3 scale on the fake driver: 1k, 10k and 100k replicas, the curve per replica (linear is 1.0), targets at 100k converge <= 30s and steady RSS <= 1.5 GiB"
	$(GO) test -run '^$$' -bench 'Scale$$' -benchtime 1x -timeout 30m ./actors/internal/treetest/
	@echo "== PERF-3 idle: a real daemon with no stacks, then with 100 idle process replicas (60s each); 10,000 replicas on the fake driver"
	$(GO) test -run '^$$' -bench PERF3IdleDaemon -benchtime 1x -timeout 30m ./runtime/daemon/
	$(GO) test -run '^$$' -bench PERF3IdleCPU -benchtime 1x -timeout 30m ./actors/internal/treetest/
	@echo "== DRV-16 usage sampling: the daemon's idle CPU and RSS with 100 and 1,000 process replicas, sampling on and off"
	$(GO) test -run '^$$' -bench DRV16UsageSampling -benchtime 1x -timeout 30m ./runtime/daemon/
	@echo "== PERF-4 daemon SIGKILL with 5,000 process replicas: all adopted and serving within 3s, 0 workload restarts"
	$(GO) test -run '^$$' -bench DaemonRestart -benchtime 1x -timeout 30m ./runtime/daemon/
	@echo "== PERF-5 wake latency: restore alone, then a whole wake through the edge (fs, and MinIO when ENGENHO_S3_* is set)"
	$(GO) test -run '^$$' -bench 'Restore64MiB|RawGetObject' -benchtime 3x ./drivers/objstore/checkpoint/
	@echo "== PERF-5 restore of 64 MiB from MinIO against a raw SDK GetObject, alternating pairs (target restore/raw <= 1.5x; needs ENGENHO_S3_*)"
	$(GO) test -run '^$$' -bench PERF5RestoreVsRawMinIO -benchtime 15x ./drivers/objstore/checkpoint/
	$(GO) test -run '^$$' -bench WakeLatency -benchtime 5x ./actors/activator/
	@echo "== PERF-6 journal: synced intent writes and batched event appends, the journal's compaction against badger's own compactors, then the p50/p99 table"
	$(GO) test -run '^$$' -bench . -benchtime 2s ./runtime/journal/
	ENGENHO_PERF=1 $(GO) test -count=1 -run TestPrintPerfTable -v ./runtime/journal/
	@echo "== PERF-7 control socket status of 1,000 services"
	$(GO) test -run '^$$' -bench Status -benchtime 20x ./runtime/control/
	@echo "== SVC-13 rollout fail-fast: apply to deploy.failed, healthcheck interval 1s, retries 2, real processes"
	$(GO) test -run '^$$' -bench SVC13RolloutFailFast -benchtime 5x ./actors/internal/treetest/
	@echo "== balancer"
	$(GO) test -run '^$$' -bench . -benchtime 1s ./runtime/balancer/

chaos: build-chaos
	$(CHAOS_BIN) chaos run --scenario ci --seed 1 --faults 200 --report chaos/reports/ci

chaos-selftest: build-chaos
	ENGENHO_CHAOS_BIN=$(CURDIR)/$(CHAOS_BIN) $(GO) test -count=1 -run SelfTest -v -timeout 20m ./chaos/

soak: build-chaos
	$(CHAOS_BIN) chaos run --scenario soak --seed $${SEED:-$$(date +%s)} --faults $${FAULTS:-5000} --report chaos/reports/soak

fuzz:
	$(GO) test -run '^$$' -fuzz '^FuzzParse$$' -fuzztime $(FUZZTIME) -fuzzminimizetime $(FUZZMIN) ./configs/stackfile/
	$(GO) test -run '^$$' -fuzz '^FuzzLoad$$' -fuzztime $(FUZZTIME) -fuzzminimizetime $(FUZZMIN) ./configs/daemonconfig/
	$(GO) test -run '^$$' -fuzz '^FuzzDecodeRequest$$' -fuzztime $(FUZZTIME) -fuzzminimizetime $(FUZZMIN) ./runtime/control/
	$(GO) test -run '^$$' -fuzz '^FuzzDecodeRecord$$' -fuzztime $(FUZZTIME) -fuzzminimizetime $(FUZZMIN) ./drivers/objstore/lease/

lint:
	$(GO) vet ./...
	$(GO) vet -tags chaos ./...
	@out=$$($(GO) list -deps ./cmd/engenho | grep /chaos); if [ -n "$$out" ]; then echo "the shipped binary links chaos code:"; echo "$$out"; exit 1; fi
	@$(GO) mod tidy -diff >/dev/null || { echo "go.mod/go.sum are not tidy: run go mod tidy"; $(GO) mod tidy -diff; exit 1; }
	@out=$$(gofmt -l .); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	$(GO) run $(STATICCHECK) -checks '$(STATICCHECK_CHECKS)' -tags chaos ./...

clean:
	rm -rf $(BIN) $(CHAOS_BIN) configs/demo-data chaos/reports
