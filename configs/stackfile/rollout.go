package stackfile

// Rollout strategies (SVC-25): how a new revision replaces the old
// instances.
const (
	// RolloutRolling replaces pending slots in batches of
	// update_config.parallelism (SVC-12).
	RolloutRolling = "rolling"
	// RolloutRecreate replaces every instance at once: all old instances
	// leave rotation together, drain and stop, and only once none is left
	// do the new ones start, like `docker compose up -d`.
	RolloutRecreate = "recreate"
)

// Strategy is the service's rollout strategy (SVC-25): x-engenho.rollout
// when written; otherwise recreate for Compose's way of saying it
// (update_config.order stop-first with parallelism 0 or at least the
// replica count, for more than one replica), else rolling. One replica
// is always rolling unless written: with one slot, a stop-first batch of
// one is the same replacement, and status keeps saying rolling, the
// default. The strategy is not in the revision: like update_config it
// steers the supervisor and applies in place (revision.go).
func (s Service) Strategy() string {
	if s.Engenho.Rollout != "" {
		return s.Engenho.Rollout
	}
	u, n := s.Deploy.UpdateConfig, s.Deploy.Replicas
	if n > 1 && u.Order == OrderStopFirst && (u.Parallelism == 0 || u.Parallelism >= n) {
		return RolloutRecreate
	}
	return RolloutRolling
}
