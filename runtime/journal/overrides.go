package journal

import (
	"fmt"
	"time"

	"github.com/engenho/engenho/messages"
)

// Limits on the text of an override.
const (
	MaxOverrides     = 1024
	maxOverrideValue = 256
	maxCommandBytes  = 1024
	maxUserBytes     = 256
)

// Fields an override can hold (SVC-23). A replicas override belongs to one
// service; a deployment override (a rollback) to the whole stack.
const (
	FieldReplicas   = "replicas"
	FieldDeployment = "deployment"
)

// Who is who asked for a change: the control socket's peer credentials
// (SO_PEERCRED) when it connected, and the user name the user database
// gives its uid, if any. Overrides and stopped intents carry it; so will
// the deploy audit.
type Who struct {
	UID  uint32 `json:"uid"`
	GID  uint32 `json:"gid"`
	PID  int32  `json:"pid,omitempty"`
	User string `json:"user,omitempty"`
}

// String is "uid 0 (root)", or "uid 1234" when the name is unknown.
func (w Who) String() string {
	if w.User != "" {
		return fmt.Sprintf("uid %d (%s)", w.UID, w.User)
	}
	return fmt.Sprintf("uid %d", w.UID)
}

// Override is an operator's command that set a value the stack file also
// declares (SVC-23). It holds across restarts and reloads until the stack
// file itself changes that field: File is the file's value when the
// override was set, so a later apply can tell.
type Override struct {
	Stack string `json:"stack"`
	// Service is empty for a stack-wide override (FieldDeployment).
	Service string `json:"service,omitempty"`
	Field   string `json:"field"`
	// Value is what the command set: a replica count, or the deployment
	// id rolled back to.
	Value string `json:"value"`
	// File is what the stack file said when the command ran: a replica
	// count, or (FieldDeployment) the digest of the file's declaration.
	File string `json:"file"`
	// Replaced is what was in force before: the file's value or an
	// earlier override's (for FieldDeployment: the deployment id rolled
	// back from).
	Replaced string `json:"replaced"`
	// Command is the command as the operator would type it.
	Command string    `json:"command"`
	By      Who       `json:"by"`
	At      time.Time `json:"at"`
}

// Declaration is what a stack's file (or an `engenho apply`) said the
// last time it was applied: the digest of its definition and the values
// an override can replace. It is how an override knows whether the file
// changed under it.
type Declaration struct {
	Digest   string         `json:"digest"`
	Source   string         `json:"source"`
	Replicas map[string]int `json:"replicas"`
	At       time.Time      `json:"at"`
}

// Override returns the stack's override of field (service "" for a
// stack-wide one).
func (st StackState) Override(service, field string) (Override, bool) {
	for _, o := range st.Overrides {
		if o.Service == service && o.Field == field {
			return o, true
		}
	}
	return Override{}, false
}

// StackChange is what one synced transaction does to a stack's desired
// state. Deploy and Rollback exclude each other; everything not set is
// kept as it was.
type StackChange struct {
	// Deploy becomes the current deployment (its ID and, when zero, its
	// AppliedAt are assigned); the former current becomes the previous.
	Deploy *Deployment
	// Rollback swaps the current and previous deployments (SVC-17).
	Rollback bool
	// Declared replaces the stack file's declaration.
	Declared *Declaration
	// With SetOverrides, Overrides replaces every override of the stack
	// (empty: none is left).
	SetOverrides bool
	Overrides    []Override
	// Audit, when set, is appended to the deploy audit log in the same
	// transaction, with the deployments and revisions before and after
	// filled in and outcome ok (issue 17).
	Audit *messages.AuditEntry
}

// ChangeStack applies c to the stack in one synced transaction and
// returns the new state. Without Deploy the stack must exist
// (ErrNotFound); Rollback needs a previous deployment (ErrNoPrevious).
func (j *Journal) ChangeStack(stack string, c StackChange) (StackState, error) {
	if err := checkStackChange(stack, &c); err != nil {
		return StackState{}, fmt.Errorf("stack %s: %w", stack, err)
	}
	if c.Deploy != nil && c.Deploy.AppliedAt.IsZero() {
		c.Deploy.AppliedAt = j.opts.Clock.Now()
	}
	var st StackState
	err := j.update(func(txn *writeTxn) error {
		var before StackState
		found, err := getJSON(txn, desiredKey(stack), &before)
		if err != nil {
			return err
		}
		if st, err = changeStack(txn, stack, c); err != nil || c.Audit == nil {
			return err
		}
		before.Stack = stack
		auditChange(c.Audit, before, found, st)
		_, err = j.writeAudit(txn, c.Audit)
		return err
	})
	if err != nil {
		return StackState{}, fmt.Errorf("journal: stack %s: %w", stack, err)
	}
	return st, nil
}

func changeStack(txn *writeTxn, stack string, c StackChange) (StackState, error) {
	var st StackState
	found, err := getJSON(txn, desiredKey(stack), &st)
	if err != nil {
		return st, err
	}
	switch {
	case c.Deploy != nil:
		if st, err = deploy(txn, stack, st, found, *c.Deploy); err != nil {
			return st, err
		}
	case !found:
		return st, ErrNotFound
	case c.Rollback:
		if st.Previous == nil {
			return st, ErrNoPrevious
		}
		cur := st.Current
		st.Current, st.Previous = *st.Previous, &cur
	}
	if c.Declared != nil {
		d := *c.Declared
		st.Declared = &d
	}
	if c.SetOverrides {
		st.Overrides = append([]Override(nil), c.Overrides...)
	}
	if err := setJSON(txn, desiredKey(stack), st); err != nil {
		return st, err
	}
	return st, dropStaleFailed(txn, st)
}

// deploy makes d the current deployment with the next id of the stack.
func deploy(txn *writeTxn, stack string, st StackState, found bool, d Deployment) (StackState, error) {
	var seq uint64
	if _, err := getJSON(txn, deploySeqKey(stack), &seq); err != nil {
		return st, err
	}
	d.ID = seq + 1
	if err := setJSON(txn, deploySeqKey(stack), d.ID); err != nil {
		return st, err
	}
	next := StackState{Stack: stack, Current: d, Declared: st.Declared, Overrides: st.Overrides}
	if found {
		prev := st.Current
		next.Previous = &prev
	}
	return next, nil
}

func checkStackChange(stack string, c *StackChange) error {
	if err := checkName("stack", stack); err != nil {
		return err
	}
	if c.Deploy != nil && c.Rollback {
		return invalid("change", "a deployment and a rollback in one change")
	}
	if c.Deploy != nil {
		if err := checkDeployment(*c.Deploy); err != nil {
			return err
		}
	}
	if c.Declared != nil {
		if err := checkDeclaration(*c.Declared); err != nil {
			return err
		}
	}
	if len(c.Overrides) > MaxOverrides {
		return invalid("overrides", "%d exceeds %d", len(c.Overrides), MaxOverrides)
	}
	seen := map[[2]string]bool{}
	for i := range c.Overrides {
		o := &c.Overrides[i]
		if o.Stack == "" {
			o.Stack = stack
		}
		if err := checkOverride(stack, *o); err != nil {
			return err
		}
		k := [2]string{o.Service, o.Field}
		if seen[k] {
			return invalid("overrides", "two overrides of %s %s", o.Service, o.Field)
		}
		seen[k] = true
	}
	return nil
}

func checkOverride(stack string, o Override) error {
	if o.Stack != stack {
		return invalid("override: stack", "%q in a change of stack %q", o.Stack, stack)
	}
	switch o.Field {
	case FieldReplicas:
		if err := checkServiceName("override: service", o.Service); err != nil {
			return err
		}
	case FieldDeployment:
		if o.Service != "" {
			return invalid("override: service", "a deployment override is stack-wide, got service %q", o.Service)
		}
	default:
		return invalid("override: field", "%q is not replicas or deployment", o.Field)
	}
	for name, v := range map[string]string{"value": o.Value, "file": o.File, "replaced": o.Replaced} {
		if len(v) > maxOverrideValue {
			return invalid("override: "+name, "%d bytes exceeds %d", len(v), maxOverrideValue)
		}
	}
	if len(o.Command) > maxCommandBytes {
		return invalid("override: command", "%d bytes exceeds %d", len(o.Command), maxCommandBytes)
	}
	return checkWho(o.By)
}

func checkWho(w Who) error {
	if len(w.User) > maxUserBytes {
		return invalid("by: user", "%d bytes exceeds %d", len(w.User), maxUserBytes)
	}
	return nil
}

func checkDeclaration(d Declaration) error {
	if len(d.Digest) > maxOverrideValue {
		return invalid("declared: digest", "%d bytes exceeds %d", len(d.Digest), maxOverrideValue)
	}
	if len(d.Source) > MaxSourceBytes {
		return invalid("declared: source", "%d bytes exceeds %d", len(d.Source), MaxSourceBytes)
	}
	for svc, n := range d.Replicas {
		if err := checkServiceName("declared: service", svc); err != nil {
			return err
		}
		if n < 0 {
			return invalid("declared: replicas["+svc+"]", "%d < 0", n)
		}
	}
	return nil
}
