package daemon

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"strings"
	"sync"

	"github.com/engenho/engenho/configs/stackfile"
	"github.com/engenho/engenho/messages"
	"github.com/engenho/engenho/runtime/journal"
)

// auditLines is how many lines of a refusal's error an audit entry keeps.
const auditLines = 8

// newAudit starts the deploy audit entry of one request (issue 17).
func newAudit(op, stack, service string, by journal.Who) *messages.AuditEntry {
	return &messages.AuditEntry{Op: op, Stack: stack, Service: service, By: auditBy(by)}
}

// auditBy is who as the audit log keeps it: the uid and its user name,
// "unknown" when the user database has none.
func auditBy(w journal.Who) messages.AuditBy {
	user := w.User
	if user == "" {
		user = "unknown"
	}
	return messages.AuditBy{UID: w.UID, User: user}
}

// planLines is an apply's plan as the audit keeps it: one line per
// service that changes ("api: update r1 -> r2 (image)").
func planLines(changes []stackfile.Change) []string {
	var out []string
	for _, c := range changes {
		if c.Action == stackfile.ActionUnchanged {
			continue
		}
		l := fmt.Sprintf("%s: %s", c.Service, c.Action)
		switch {
		case c.FromRevision != "" && c.ToRevision != "" && c.FromRevision != c.ToRevision:
			l += " " + c.FromRevision + " -> " + c.ToRevision
		case c.ToRevision != "" && c.FromRevision == "":
			l += " " + c.ToRevision
		}
		if c.FromReplicas != c.ToReplicas && c.FromRevision != "" && c.ToRevision != "" {
			l += fmt.Sprintf(" replicas %d -> %d", c.FromReplicas, c.ToReplicas)
		}
		if len(c.Fields) > 0 {
			l += " (" + strings.Join(c.Fields, ", ") + ")"
		}
		out = append(out, l)
	}
	return out
}

// firstLines is the first n lines of an error's text.
func firstLines(s string, n int) string {
	lines := strings.SplitN(s, "\n", n+1)
	if len(lines) > n {
		lines[n] = fmt.Sprintf("(%d more lines)", strings.Count(s, "\n")+1-n)
	}
	return strings.Join(lines, "\n")
}

// errRecording marks an error of the journal write itself: the request
// failed, it was not refused.
var errRecording = errors.New("recording failed")

// finishAudit writes a's entry unless the change already carried it (its
// Seq is set): a refused or failed request, or one that changed nothing.
// The entry shows the stack's current deployment as both from and to.
// An entry that cannot be written is logged through the event log.
func (d *Deployer) finishAudit(a *messages.AuditEntry, err error) {
	if a == nil || a.Seq != 0 {
		return
	}
	switch {
	case err == nil:
		a.Outcome = messages.AuditOK
		if a.Message == "" {
			a.Message = "nothing changed"
		}
	case errors.Is(err, errRecording):
		a.Outcome, a.Message = messages.AuditFailed, firstLines(err.Error(), auditLines)
	default:
		a.Outcome, a.Message = messages.AuditRefused, firstLines(err.Error(), auditLines)
	}
	a.FromDeployment, a.ToDeployment, a.FromRevisions, a.ToRevisions = 0, 0, nil, nil
	if st, found, rerr := d.journal.Stack(a.Stack); a.Stack != "" && rerr == nil && found {
		a.FromDeployment, a.ToDeployment = st.Current.ID, st.Current.ID
		a.FromRevisions, a.ToRevisions = maps.Clone(st.Current.Revisions), maps.Clone(st.Current.Revisions)
	}
	if _, werr := d.journal.RecordAudit(*a); werr != nil {
		d.record(messages.Event{Kind: messages.KindDeployFailed, Level: messages.LevelError, Stack: a.Stack, Service: a.Service,
			By: a.By.String(), Message: fmt.Sprintf("%s of %s: the audit entry was not recorded: %v", a.Op, a.Stack, werr)})
	}
}

// refused records a request refused before the deployer saw it (a bad
// stack file, a stack the config lists). A stack name that is not valid
// (a file that names none, or a bad one) is recorded as no stack: the
// error names the file.
func (d *Deployer) refused(op, stack, service string, by journal.Who, err error) {
	if !stackfile.ValidName(stack) {
		stack, service = "", ""
	}
	d.finishAudit(newAudit(op, stack, service, by), err)
}

// self is the daemon's own identity, for the changes it makes without a
// request: a reload of the config's stack files, a rotated secret.
func self() journal.Who { return who(context.Background()) }

// seedActors takes who asked for each stack's latest recorded change from
// the newest audit entries, so the events of a rollout that a restart
// resumes still carry the actor.
func (d *Deployer) seedActors() {
	if d.actors == nil {
		return
	}
	entries, err := d.journal.History("", journal.DefaultReadLimit)
	if err != nil {
		return
	}
	for _, e := range entries { // oldest first: the newest wins
		if e.Outcome == messages.AuditOK && (e.FromDeployment != e.ToDeployment || e.Op == messages.AuditServiceStop || e.Op == messages.AuditServiceStart) {
			d.actors.set(e.Stack, e.By.String())
		}
	}
}

// actors remembers, per stack, who asked for the deployment in force, so
// the events the tree raises while it rolls out carry the actor
// (issue 17). Safe for concurrent use: the deployer writes, the event
// sink reads.
type actors struct {
	mu sync.Mutex
	by map[string]string
}

func newActors() *actors { return &actors{by: map[string]string{}} }

func (a *actors) set(stack, by string) {
	if a == nil {
		return
	}
	a.mu.Lock()
	a.by[stack] = by
	a.mu.Unlock()
}

// stamp sets ev.By, when empty, for the kinds a deployment or an intent
// causes: deploy.*, rollout.*, override.*, service.stopped/started,
// stack.removed.
func (a *actors) stamp(ev *messages.Event) {
	if a == nil || ev.By != "" || ev.Stack == "" || !causedByDeployment(ev.Kind) {
		return
	}
	a.mu.Lock()
	ev.By = a.by[ev.Stack]
	a.mu.Unlock()
}

func causedByDeployment(kind string) bool {
	switch kind {
	case messages.KindServiceStopped, messages.KindServiceStarted, messages.KindStackRemoved,
		messages.KindOverrideSet, messages.KindOverrideDropped:
		return true
	}
	return strings.HasPrefix(kind, "deploy.") || strings.HasPrefix(kind, "rollout.")
}
