package service

// rolledBack is the fingerprint of rollout.rolled_back (SVC-26): which
// (deployment, revision) failed and which revision the service went back
// to. A service actor that starts again on the same failed deployment
// (a restart of the actor or the daemon) finds it announced.
func rolledBack(failed, to Target) string {
	return "rolled back from " + failed.key() + " to " + to.Revision
}
