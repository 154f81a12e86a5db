package service

// holdForRecreate: under the recreate strategy (SVC-25) no new instance
// starts while any instance of another revision is still there, retiring
// ones included: every old instance leaves rotation together, drains
// (x-engenho.drain, one window for all of them) and stops, and only then
// do the new ones start, like `docker compose up -d`. It holds from the
// state alone, so a daemon restarted half way through a recreate does not
// start new instances beside old ones either.
func holdForRecreate(s State) bool {
	if !s.Target.Update.recreate() {
		return false
	}
	for _, r := range s.Replicas {
		if !r.Leaving && r.Revision != s.Target.Revision {
			return true
		}
	}
	return false
}
