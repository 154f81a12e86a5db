package messages

// ExitReason says why an actor ended.
type ExitReason string

const (
	// ExitNormal: the actor finished its work and ended itself.
	ExitNormal ExitReason = "normal"
	// ExitShutdown: its supervisor asked it to stop.
	ExitShutdown ExitReason = "shutdown"
	// ExitPanic: its Receive panicked.
	ExitPanic ExitReason = "panic"
	// ExitError: it ended itself with an error.
	ExitError ExitReason = "error"
	// ExitEscalated: it was a supervisor whose children restarted more often
	// than its intensity allows (SUP-8).
	ExitEscalated ExitReason = "escalated"
	// ExitKilled: it did not stop within its shutdown budget and was killed.
	ExitKilled ExitReason = "killed"
)

// Abnormal reports whether a transient child ending this way is restarted
// (SUP-6): everything but a normal end or a requested shutdown.
func (r ExitReason) Abnormal() bool {
	return r != ExitNormal && r != ExitShutdown
}

// ChildExited tells a supervisor that one of its children ended. Gen is the
// child's incarnation, so a late notice from an earlier one is ignored.
type ChildExited struct {
	Path   string
	Name   string
	Gen    uint64
	Reason ExitReason
	// Err is the panic value or error text, empty for a normal end.
	Err string
	// Chain lists, outermost first, why each supervisor on the way gave up.
	Chain []string
}

// Shutdown asks an actor to stop: it stops its own children in reverse
// start order, each within its budget, then ends with ExitShutdown. It does
// not stop workloads: an actor stop is not a workload stop (SUP-9).
type Shutdown struct{}

// ExitSelf is what an actor sends itself to end with a reason; its children
// are stopped first.
type ExitSelf struct {
	Reason ExitReason
	Err    string
	Chain  []string
}

// RestartDue is a supervisor's own timer: the delayed restart numbered Seq
// of its child Name fell due.
type RestartDue struct {
	Name string
	Seq  uint64
}

// StopTimedOut is a supervisor's own timer: child Name (incarnation Gen) did
// not stop within its shutdown budget.
type StopTimedOut struct {
	Name string
	Gen  uint64
}

// RestartChild asks the tree to restart the actor subtree at Path (the
// operator's `engenho restart-child PATH`). It is routed down from the root;
// the answer is a RestartChildResult.
type RestartChild struct {
	Path string
}

// RestartChildResult answers RestartChild; Err is empty on success.
type RestartChildResult struct {
	Path string
	Err  string
}

// Deliver routes Msg down the tree to the actor at Path (from the root);
// the actor receives Msg as if sent to it directly. The chaos suite uses
// it to reach an actor by path. The answer, if any, goes to the sender;
// a missing path is answered with a DeliverFailed.
type Deliver struct {
	Path string
	Msg  any
}

// DeliverFailed answers a Deliver whose path names no live actor.
type DeliverFailed struct {
	Path string
	Err  string
}

// InjectPanic makes the receiving actor panic inside its Receive, as a bug
// would (chaos fault, CHS-2). The supervision layer handles the panic like
// any other.
type InjectPanic struct {
	Reason string
}
