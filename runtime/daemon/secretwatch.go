package daemon

import (
	"context"
	"crypto/sha256"
	"fmt"
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/engenho/engenho/configs/stackfile"
	"github.com/engenho/engenho/drivers/clock"
	"github.com/engenho/engenho/messages"
	"github.com/engenho/engenho/runtime/journal"
)

// Secret rotation (issue 15). A `file:` secret is read when its stack is
// applied; afterwards the daemon re-reads every recorded stack's secret
// files each secretRefresh on its clock (SUP-19). A file whose content
// changed is a rotation: the stack's recorded definition is applied again
// with the new value (sealed in the journal, SEC-2), one secret.rotated
// event per service and secret says so (names, never the value), and the
// service's x-engenho.secrets.on_change decides the rest:
//   - restart: the value's digest is in the revision, so the apply is a
//     new revision, rolled out through update_config like any update;
//   - none: the revision stays; instances created from now on get the new
//     value, and status lists the secret as stale for the service while
//     an instance that was running at the rotation still runs.
//
// A file that cannot be read keeps the value recorded (logged once per
// error); so does a stack held by a rollback (engenho rollback pins the
// deployment until the next apply) or being removed.
//
// The watch is armed only while a recorded stack has a file secret
// (PERF-3: an idle daemon sleeps): a round that finds none arms no next
// round, and the deployer pokes the watch after every change of the
// desired state, so a stack applied with a file secret arms it again.
// The first round runs at start whatever the stacks, to read back the
// stale marks (seedStale).

// secretRefresh is how often the secret files are read again.
const secretRefresh = 2 * time.Second

// secretWatch re-reads the secret files of the recorded stacks.
type secretWatch struct {
	dep  *Deployer
	clk  clock.Clock
	log  func(msg string, err error)
	now  func() []messages.ServiceStatus // the board, for stale tracking
	tick time.Duration

	mu      sync.Mutex
	timer   clock.Timer // the next round; nil when none is armed
	stopped bool
	// busy: a round is under way and will arm the next one if needed;
	// poked: the desired state changed during it.
	busy, poked bool
	running     sync.WaitGroup
	// cache maps a stack to its file secrets, valid while the recorded
	// definition hashes to sum (no Unmarshal on every round).
	cache map[string]cachedSecrets
	// failing is the last error logged per file or stack, so a file that
	// stays unreadable is logged once.
	failing map[string]string
	// stale maps STACK/SERVICE to secret name to what rotated it under
	// on_change none.
	stale map[string]map[string]staleSecret
	// seeded: stale holds the rotations the journal's events recorded
	// before this daemon started (done in the first round).
	seeded bool
	// onRound, when set (tests), is called after each round.
	onRound func()
}

// staleSecret is one rotation under on_change none: the instances that
// were running then keep the old value. A rotation read back from the
// journal after a daemon restart knows only when it was (instances nil):
// an instance started before then keeps the old value.
type staleSecret struct {
	at        time.Time
	instances map[string]bool
}

func (s staleSecret) holds(r messages.ReplicaStatus) bool {
	if s.instances != nil {
		return s.instances[r.Instance]
	}
	return !r.StartedAt.IsZero() && r.StartedAt.Before(s.at)
}

type cachedSecrets struct {
	sum     [32]byte
	secrets []fileSecret
}

// fileSecret is one `file:` secret of one service of a recorded stack.
type fileSecret struct {
	service, secret, file, digest string
	restarts                      bool
}

func newSecretWatch(d *Daemon, rt *runtime) *secretWatch {
	return makeSecretWatch(rt.deployer, d.clk,
		func(msg string, err error) { d.log.Warn().Err(err).Msg(msg) },
		func() []messages.ServiceStatus { return rt.board.Services("") })
}

func makeSecretWatch(dep *Deployer, clk clock.Clock, log func(string, error), board func() []messages.ServiceStatus) *secretWatch {
	return &secretWatch{
		dep: dep, clk: clk, tick: secretRefresh, log: log, now: board,
		cache: map[string]cachedSecrets{}, failing: map[string]string{},
		stale: map[string]map[string]staleSecret{},
	}
}

func (w *secretWatch) start() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.stopped && w.timer == nil {
		w.timer = w.clk.AfterFunc(w.tick, w.round)
	}
}

// stop disarms the timer and waits for a round under way.
func (w *secretWatch) stop() {
	w.mu.Lock()
	w.stopped = true
	if w.timer != nil {
		w.timer.Stop()
	}
	w.mu.Unlock()
	w.running.Wait()
}

// poke arms a round when none is armed: the desired state changed, and
// may now have a file secret to watch.
func (w *secretWatch) poke() {
	w.mu.Lock()
	defer w.mu.Unlock()
	switch {
	case w.stopped:
	case w.busy:
		w.poked = true
	case w.timer == nil:
		w.timer = w.clk.AfterFunc(w.tick, w.round)
	}
}

func (w *secretWatch) round() {
	w.mu.Lock()
	if w.stopped {
		w.mu.Unlock()
		return
	}
	w.running.Add(1)
	w.busy, w.poked, w.timer = true, false, nil
	w.mu.Unlock()
	defer w.running.Done()
	if !w.seeded {
		w.seedStale()
		w.seeded = true
	}
	watching := w.check()
	w.mu.Lock()
	w.busy = false
	if !w.stopped && (watching || w.poked) {
		w.timer = w.clk.AfterFunc(w.tick, w.round)
	}
	w.mu.Unlock()
	if w.onRound != nil {
		w.onRound()
	}
}

// check reads every secret file once and rotates what changed. It reports
// whether there is anything to watch: a recorded stack with a file secret,
// or a stack or the journal it could not read (tried again next round).
func (w *secretWatch) check() (watching bool) {
	states, err := w.dep.journal.Stacks()
	if err != nil {
		w.once("journal", "secret rotation: cannot read the stacks", err)
		return true
	}
	read := map[string]fileRead{}
	for _, st := range states {
		if st.Current.Source == SourceRemove {
			continue
		}
		secrets, err := w.secretsOf(st)
		if err != nil {
			w.once("stack:"+st.Stack, "secret rotation: cannot read stack "+st.Stack, err)
			watching = true
			continue
		}
		if len(secrets) > 0 {
			watching = true
		}
		fresh := map[string]string{}
		for _, s := range secrets {
			r, ok := read[s.file]
			if !ok {
				r.value, r.err = stackfile.ReadSecretFile(s.file)
				read[s.file] = r
				if r.err != nil {
					w.once(s.file, "secret rotation: cannot read "+s.file+"; the secrets read from it keep the values recorded", r.err)
				} else {
					w.clear(s.file)
				}
			}
			if r.err != nil {
				continue
			}
			if w.dep.key.Digest(stackfile.SecretFileLabel(s.secret), r.value) != s.digest {
				fresh[s.file] = r.value
			}
		}
		if len(fresh) == 0 {
			continue
		}
		if _, pinned := st.Override("", journal.FieldDeployment); pinned {
			w.once("pin:"+st.Stack, "secret rotation: stack "+st.Stack+" is held by a rollback; its changed secrets apply with the next `engenho apply`", nil)
			continue
		}
		w.rotate(st.Stack, fresh)
	}
	return watching
}

type fileRead struct {
	value string
	err   error
}

// secretsOf lists st's file secrets, from the cache while the recorded
// definition is the same.
func (w *secretWatch) secretsOf(st journal.StackState) ([]fileSecret, error) {
	sum := sha256.Sum256(st.Current.Definition)
	if c, ok := w.cache[st.Stack]; ok && c.sum == sum {
		return c.secrets, nil
	}
	def, err := stackfile.Unmarshal(st.Current.Definition, w.dep.key)
	if err != nil {
		return nil, err
	}
	var out []fileSecret
	for _, name := range def.Order {
		svc := def.Services[name]
		for _, s := range svc.Secrets {
			if s.File != "" {
				out = append(out, fileSecret{service: name, secret: s.Source, file: s.File, digest: s.Digest(), restarts: svc.Engenho.Secrets.Restarts()})
			}
		}
	}
	w.cache[st.Stack] = cachedSecrets{sum: sum, secrets: out}
	return out, nil
}

// rotate applies stack again with the fresh file values and tells.
func (w *secretWatch) rotate(stack string, fresh map[string]string) {
	rotated, err := w.dep.rotateSecrets(context.Background(), stack, fresh)
	if err != nil {
		w.once("apply:"+stack, "secret rotation: stack "+stack+" refused its new secret values; it keeps the old ones", err)
		return
	}
	w.clear("apply:" + stack)
	running := map[string][]string{}
	for _, svc := range w.now() {
		if svc.Stack != stack {
			continue
		}
		for _, r := range svc.Replicas {
			if r.Instance != "" {
				running[svc.Service] = append(running[svc.Service], r.Instance)
			}
		}
	}
	for _, r := range rotated {
		msg := fmt.Sprintf("secret %s of %s/%s changed: rolling the service through its update_config (on_change: restart)", r.secret, stack, r.service)
		policy := stackfile.OnChangeRestart
		if !r.restarts {
			policy = stackfile.OnChangeNone
			msg = fmt.Sprintf("secret %s of %s/%s changed: recorded for the instances created from now on; the running ones keep the old value (on_change: none)", r.secret, stack, r.service)
			w.markStale(stack, r.service, r.secret, staleSecret{at: w.dep.now(), instances: setOf(running[r.service])})
		}
		w.dep.record(messages.Event{
			UnixMs: w.dep.now().UnixMilli(), Level: messages.LevelInfo, Kind: messages.KindSecretRotated,
			Stack: stack, Service: r.service, Actor: "daemon", Message: msg,
			Fields: map[string]string{"secret": r.secret, "on_change": policy},
		})
	}
}

func (w *secretWatch) markStale(stack, service, secret string, st staleSecret) {
	if st.instances != nil && len(st.instances) == 0 {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	key := stack + "/" + service
	if w.stale[key] == nil {
		w.stale[key] = map[string]staleSecret{}
	}
	w.stale[key][secret] = st
}

func setOf(names []string) map[string]bool {
	set := map[string]bool{}
	for _, n := range names {
		set[n] = true
	}
	return set
}

// seedStale reads back, from the journal's events, the rotations under
// on_change none that happened before this daemon started, so status
// still lists a stale secret after a restart (its instances were adopted
// with the old value). Events past retention are gone, and so is their
// mark.
func (w *secretWatch) seedStale() {
	var after uint64
	for {
		evs, err := w.dep.journal.EventsAfter(after, 1000)
		if err != nil {
			w.once("journal-events", "secret rotation: cannot read past rotations; status lists no stale secret from before this start", err)
			return
		}
		for _, ev := range evs {
			after = ev.Seq
			if ev.Kind == messages.KindSecretRotated && ev.Fields["on_change"] == stackfile.OnChangeNone {
				w.markStale(ev.Stack, ev.Service, ev.Fields["secret"], staleSecret{at: time.UnixMilli(ev.UnixMs)})
			}
		}
		if len(evs) < 1000 {
			return
		}
	}
}

// staleSecrets names, sorted, the secrets of svc that changed under
// on_change none while an instance still running was running already.
func (w *secretWatch) staleSecrets(svc messages.ServiceStatus) []string {
	if w == nil {
		return nil
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	key := svc.Stack + "/" + svc.Service
	bySecret := w.stale[key]
	if len(bySecret) == 0 {
		return nil
	}
	var out []string
	for secret, old := range bySecret {
		still := false
		for _, r := range svc.Replicas {
			if old.holds(r) {
				still = true
				break
			}
		}
		if still {
			out = append(out, secret)
		} else {
			delete(bySecret, secret)
		}
	}
	sort.Strings(out)
	return out
}

func (w *secretWatch) once(key, msg string, err error) {
	text := msg
	if err != nil {
		text += ": " + err.Error()
	}
	w.mu.Lock()
	seen := w.failing[key] == text
	w.failing[key] = text
	w.mu.Unlock()
	if !seen {
		w.log(msg, err)
	}
}

func (w *secretWatch) clear(key string) {
	w.mu.Lock()
	delete(w.failing, key)
	w.mu.Unlock()
}

// rotatedSecret is one service's secret that got a new value.
type rotatedSecret struct {
	service, secret string
	restarts        bool
}

// rotateSecrets records stack's current definition again with the fresh
// values (by file) of its `file:` secrets, as an apply from the same
// source: a new deployment, whose revision changes for the services whose
// secrets restart them. Read and apply are one step under the deployer's
// lock, so a concurrent apply is never undone.
func (d *Deployer) rotateSecrets(ctx context.Context, stack string, fresh map[string]string) ([]rotatedSecret, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	cur, found, err := d.current(stack)
	if err != nil || !found || cur.Current.Source == SourceRemove {
		return nil, err
	}
	st, err := stackfile.Unmarshal(cur.Current.Definition, d.key)
	if err != nil {
		return nil, err
	}
	var out []rotatedSecret
	for _, name := range st.Order {
		svc := st.Services[name]
		for i, s := range svc.Secrets {
			v, ok := fresh[s.File]
			if !ok || s.File == "" || d.key.Digest(stackfile.SecretFileLabel(s.Source), v) == s.Digest() {
				continue
			}
			svc.Secrets[i].Value = stackfile.Secret(v)
			out = append(out, rotatedSecret{service: name, secret: s.Source, restarts: svc.Engenho.Secrets.Restarts()})
		}
	}
	if len(out) == 0 {
		return nil, nil
	}
	a := newAudit(messages.AuditApply, st.Name, "", self())
	a.Message = "a file secret changed"
	_, err = d.applyLocked(ctx, st, cur.Current.Source, false, a)
	d.finishAudit(a, err)
	if err != nil {
		return nil, err
	}
	return slices.Clip(out), nil
}
