package messages

import "time"

// Override is a value an operator's command holds for a service instead
// of what its stack file says (SVC-23), as status shows it: `replicas 5
// (file says 3; scaled by uid 0 (root) at 12:03)`.
type Override struct {
	// Field is replicas (engenho scale), deployment (engenho rollback,
	// stack-wide) or stopped (engenho service stop, which the stack file
	// cannot say, so File is empty).
	Field string `json:"field"`
	Value string `json:"value"`
	// File is what the stack file says: a replica count, or for
	// deployment the id of the deployment the file made.
	File    string `json:"file,omitempty"`
	Command string `json:"command,omitempty"`
	// By is who ran the command, "uid 0 (root)"; UID and User say the
	// same for programs. All three are empty when it was not recorded.
	By   string    `json:"by,omitempty"`
	UID  *uint32   `json:"uid,omitempty"`
	User string    `json:"user,omitempty"`
	At   time.Time `json:"at"`
}

// Override fields.
const (
	OverrideReplicas   = "replicas"
	OverrideDeployment = "deployment"
	OverrideStopped    = "stopped"
)
