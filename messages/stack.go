package messages

import "github.com/engenho/engenho/configs/stackfile"

// StackDeployment is one recorded deployment of a stack: the parsed
// definition, immutable once recorded, and each service's effective
// revision.
type StackDeployment struct {
	ID         string
	Definition stackfile.Stack
	// Revisions maps a service to its effective revision: the definition's
	// hash, with a redeploy count appended after `engenho redeploy`.
	Revisions map[string]string
}

// Revision returns the effective revision of service in d.
func (d StackDeployment) Revision(service string) string {
	if r, ok := d.Revisions[service]; ok {
		return r
	}
	if svc, ok := d.Definition.Services[service]; ok {
		return svc.Revision()
	}
	return ""
}

// ApplyStack gives the tree a stack's desired state, already recorded in
// the journal: the current deployment, the previous one (for rollback) and
// the services with a stopped intent (SVC-5, SVC-10).
type ApplyStack struct {
	Stack    string
	Current  StackDeployment
	Previous *StackDeployment
	Stopped  map[string]bool
}

// RemoveStack retires every service of the stack; the stack actor then
// ends (SVC-17).
type RemoveStack struct {
	Stack string
}

// ToService routes Msg (ServiceIntent, ServiceRetry) to one service actor
// through the root and its stack.
type ToService struct {
	Stack   string
	Service string
	Msg     any
}

// StackGone is what a stack actor tells the root when it has removed
// everything and ends.
type StackGone struct {
	Stack string
}
