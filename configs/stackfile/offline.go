package stackfile

// OfflineWarnings are what `engenho config` says, without a node, about
// services a driver would refuse: there they are warnings, since the file
// itself is sound; `engenho apply` asks the node's driver, which refuses
// them with an error.
func OfflineWarnings(st *Stack) []Problem {
	var out []Problem
	for _, name := range st.Order {
		svc := st.Services[name]
		if svc.Driver == DefaultDriver && svc.Image != "" {
			out = append(out, st.locate(Problem{Key: "services." + name + ".image", Err: ErrWarning,
				Msg: "the process driver runs commands on the node, not images (apply refuses it): run the image with x-engenho.driver: incus, or drop image and give the command"}))
		}
	}
	return out
}

// Locate fills in p's file and line from where the file wrote its key.
func (st *Stack) Locate(p Problem) Problem { return st.locate(p) }

func (st *Stack) locate(p Problem) Problem {
	p.File = st.Source
	if at, ok := st.pos.lookup(p.Key); ok {
		p.Line, p.Column = at.line, at.col
	}
	return p
}
