package drivers

// ServiceIndex groups instance names by their stack and service labels,
// so that a List for one service (every sweep of every service, PERF-3)
// looks at that service's instances, not at every instance of the node.
// It is not safe for concurrent use: its driver guards it.
type ServiceIndex map[serviceKey]map[string]struct{}

type serviceKey struct{ stack, service string }

func keyOf(l Labels) serviceKey { return serviceKey{l[LabelStack], l[LabelService]} }

// Add files name under its labels' stack and service.
func (x ServiceIndex) Add(name string, l Labels) {
	k := keyOf(l)
	if x[k] == nil {
		x[k] = map[string]struct{}{}
	}
	x[k][name] = struct{}{}
}

// Remove drops name, filed under l.
func (x ServiceIndex) Remove(name string, l Labels) {
	k := keyOf(l)
	delete(x[k], name)
	if len(x[k]) == 0 {
		delete(x, k)
	}
}

// Candidates are the names a List with selector needs to look at (each
// still to be matched against the whole selector), and true; or false
// when selector does not name both a stack and a service, and every
// instance is a candidate.
func (x ServiceIndex) Candidates(selector Labels) (map[string]struct{}, bool) {
	_, stack := selector[LabelStack]
	_, service := selector[LabelService]
	if !stack || !service {
		return nil, false
	}
	return x[keyOf(selector)], true
}
