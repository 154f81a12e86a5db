package messages

import "fmt"

// AuditOutcome is how a deployment request ended (issue 17, deploy audit).
type AuditOutcome string

const (
	// AuditOK: the request was recorded in the journal.
	AuditOK AuditOutcome = "ok"
	// AuditRefused: the request was refused before anything was recorded
	// (a bad stack file, an unknown service, no previous deployment).
	AuditRefused AuditOutcome = "refused"
	// AuditFailed: recording it failed (a journal error).
	AuditFailed AuditOutcome = "failed"
)

// Audited operations.
const (
	AuditApply        = "apply"
	AuditScale        = "scale"
	AuditRollback     = "rollback"
	AuditRedeploy     = "redeploy"
	AuditRemove       = "remove"
	AuditServiceStop  = "service-stop"
	AuditServiceStart = "service-start"
)

// AuditBy is who asked: the control socket peer's uid and the name the
// user database gives it ("unknown" when it gives none).
type AuditBy struct {
	UID  uint32 `json:"uid"`
	User string `json:"user"`
}

// String is "uid 0 (root)".
func (b AuditBy) String() string { return fmt.Sprintf("uid %d (%s)", b.UID, b.User) }

// AuditEntry is one record of the deploy audit log: one deployment request,
// whatever its outcome. Seq grows by one per entry across restarts.
type AuditEntry struct {
	Seq     uint64  `json:"seq"`
	UnixMs  int64   `json:"unix_ms"`
	Op      string  `json:"op"`
	Stack   string  `json:"stack"`
	Service string  `json:"service,omitempty"`
	By      AuditBy `json:"by"`
	// FromDeployment and ToDeployment are the stack's current deployment
	// ids before and after (0: none, or unchanged when equal).
	FromDeployment uint64 `json:"from_deployment,omitempty"`
	ToDeployment   uint64 `json:"to_deployment,omitempty"`
	// FromRevisions and ToRevisions are the revision of each service.
	FromRevisions map[string]string `json:"from_revisions,omitempty"`
	ToRevisions   map[string]string `json:"to_revisions,omitempty"`
	Outcome       AuditOutcome      `json:"outcome"`
	// Message is the error (refused, failed) or a short note (ok); never
	// a secret value.
	Message string `json:"message,omitempty"`
	// Plan is an apply's plan, one line per changed service.
	Plan []string `json:"plan,omitempty"`
}
