package stackfile

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/engenho/engenho/drivers"
)

// Node is what Validate needs to know about this node. Every method only
// reads: validation changes nothing, so a refused stack leaves the node
// as it was (SVC-2).
type Node interface {
	// Driver returns the named instance driver, if this node has it.
	Driver(name string) (drivers.Driver, bool)
	// PortClaimedBy reports which deployed service publishes port.
	PortClaimedBy(port int) (stack, service string, ok bool)
	// PortFree reports whether nothing on the node listens on
	// hostIP:port. It is asked only for ports no stack claims.
	PortFree(hostIP string, port int) bool
	// HostClaimedBy reports which deployed service has the edge host.
	HostClaimedBy(host string) (stack, service string, ok bool)
	// Bin is the engenho binary's path, for ${ENGENHO_BIN}.
	Bin() string
}

// validationID is the instance id of the spec Validate shows the driver;
// no instance is ever created under it.
const validationID = "validate"

// Validate checks that every service of st can run on this node (SVC-2):
// the stack is well formed (Check), each service's driver is present and
// accepts the service's instance spec (and its sidecars'), published ports
// are free or already the same stack's, edge hosts are not another
// stack's. It returns nil or a *ValidationError naming stack, service and
// key of every problem; errors.Is finds the kinds (ErrPortClaimed, ...)
// and the drivers' own (drivers.ErrInvalid, ...).
//
// The driver is shown the spec with secret values withheld, and any
// secret that still shows in a driver's message is scrubbed (SEC-2).
func Validate(ctx context.Context, st *Stack, node Node) error {
	if st == nil || node == nil {
		return errors.New("stackfile: validate needs a stack and a node")
	}
	if err := st.Check(); err != nil {
		var pe *ParseError
		if errors.As(err, &pe) {
			return &ValidationError{Stack: st.Name, Problems: pe.Problems}
		}
		return err
	}
	if ps := validateNode(ctx, st, node); len(ps) > 0 {
		return &ValidationError{Stack: st.Name, Problems: ps}
	}
	return nil
}

// ValidateRest adds to a refused file's *ParseError what the node would
// refuse about the services the file did define well (a missing driver,
// a published port in use, a claimed host), so one answer lists every
// problem of both stages (SVC-1, SVC-2) instead of the node's coming
// only once the file is fixed. Any other error is returned as it is.
func ValidateRest(ctx context.Context, err error, node Node) error {
	var pe *ParseError
	if !errors.As(err, &pe) || pe.partial == nil || len(pe.partial.Services) == 0 || node == nil {
		return err
	}
	ps := validateNode(ctx, pe.partial, node)
	if len(ps) == 0 {
		return err
	}
	all := append(slices.Clone(pe.Problems), ps...)
	sortProblems(all)
	return &ParseError{Problems: all}
}

// validateNode asks the node about each service of st.
func validateNode(ctx context.Context, st *Stack, node Node) []Problem {
	v := &validator{st: st, node: node}
	for _, svc := range st.List() {
		v.driver(ctx, svc)
		v.ports(svc)
		v.host(svc)
	}
	return v.problems
}

type validator struct {
	st       *Stack
	node     Node
	problems []Problem
}

func (v *validator) add(key string, err error, format string, args ...any) {
	p := Problem{File: v.st.Source, Key: key, Msg: fmt.Sprintf(format, args...), Err: err}
	if at, ok := v.st.pos.lookup(key); ok {
		p.Line, p.Column = at.line, at.col
	}
	v.problems = append(v.problems, p)
}

func (v *validator) driver(ctx context.Context, svc Service) {
	key := "services." + svc.Name
	drv, ok := v.node.Driver(svc.Driver)
	if !ok || drv == nil {
		v.add(key+".driver", ErrDriverMissing, "driver %s is not available on this node", quote(svc.Driver))
		return
	}
	inst := Instance{Stack: v.st.Name, Slot: 1, ID: validationID, Bin: v.node.Bin()}
	secrets := append(append(svc.Env.secrets(), sidecarSecrets(svc)...), secretValues(svc.Secrets)...)
	if !svc.Standalone() {
		spec := withhold(InstanceSpec(svc, inst), svc.Env)
		if err := drv.Validate(ctx, spec); err != nil {
			err = scrub(err, secrets)
			v.add(key, &kindError{ErrDriverRefused, err}, "driver %s refused the service: %v", svc.Driver, err)
		}
	}
	for i, sc := range svc.Sidecars {
		spec := withhold(SidecarSpec(svc, sc, inst), svc.Env, sc.Env)
		if err := drv.Validate(ctx, spec); err != nil {
			err = scrub(err, secrets)
			v.add(index(key+".sidecars", i), &kindError{ErrDriverRefused, err}, "driver %s refused sidecar %s: %v", svc.Driver, sc.Name, err)
		}
	}
}

// withhold blanks the spec's secret env values: validation needs none.
func withhold(spec drivers.Spec, layers ...Env) drivers.Spec {
	for _, env := range layers {
		for k, v := range env {
			if v.secret {
				spec.Env[k] = ""
			}
		}
	}
	for i := range spec.Secrets {
		spec.Secrets[i].Value = ""
	}
	return spec
}

func sidecarSecrets(svc Service) []string {
	var out []string
	for _, sc := range svc.Sidecars {
		out = append(out, sc.Env.secrets()...)
	}
	return out
}

// ports: a published port another stack claims is refused; one this stack
// already claims is fine (the balancer re-targets it); otherwise it must
// be free.
func (v *validator) ports(svc Service) {
	for i, p := range svc.Ports {
		if p.Published == 0 {
			continue
		}
		key := index("services."+svc.Name+".ports", i)
		stack, service, claimed := v.node.PortClaimedBy(p.Published)
		switch {
		case claimed && stack != v.st.Name:
			v.add(key, ErrPortClaimed, "port %d is published by stack %s service %s", p.Published, stack, service)
		case !claimed && !v.node.PortFree(p.HostIP, p.Published):
			v.add(key, ErrPortBusy, "port %d is in use on this node (%s)", p.Published, p.ListenAddr())
		}
	}
}

func (v *validator) host(svc Service) {
	h := svc.EdgeHost()
	if h == "" {
		return
	}
	if stack, service, claimed := v.node.HostClaimedBy(h); claimed && stack != v.st.Name {
		v.add("services."+svc.Name+"."+hostKey(svc), ErrHostClaimed, "host %s belongs to stack %s service %s", h, stack, service)
	}
}

// ValidateTogether checks stacks deployed in one request against each
// other: each may be fine on the node alone, yet two of them must not
// publish the same port or have the same edge host, nor be the same
// stack twice (SVC-2). It returns one *ValidationError per stack with a
// problem, naming the other stack's file.
func ValidateTogether(stacks []*Stack) []error {
	type claim struct{ stack, service, file string }
	ports, hosts, names := map[int]claim{}, map[string]claim{}, map[string]string{}
	var errs []error
	for _, st := range stacks {
		v := &validator{st: st}
		if file, dup := names[st.Name]; dup {
			v.add("name", ErrValue, "stack %s is also defined by %s in this request", st.Name, file)
		}
		names[st.Name] = st.Source
		for _, svc := range st.List() {
			for i, p := range svc.Ports {
				if p.Published == 0 {
					continue
				}
				if c, taken := ports[p.Published]; taken && c.stack != st.Name {
					v.add(index("services."+svc.Name+".ports", i), ErrPortClaimed, "port %d is also published by stack %s service %s (%s)", p.Published, c.stack, c.service, c.file)
				}
				ports[p.Published] = claim{st.Name, svc.Name, st.Source}
			}
			if h := svc.EdgeHost(); h != "" {
				if c, taken := hosts[h]; taken && c.stack != st.Name {
					v.add("services."+svc.Name+"."+hostKey(svc), ErrHostClaimed, "host %s is also used by stack %s service %s (%s)", h, c.stack, c.service, c.file)
				}
				hosts[h] = claim{st.Name, svc.Name, st.Source}
			}
		}
		if len(v.problems) > 0 {
			errs = append(errs, &ValidationError{Stack: st.Name, Problems: v.problems})
		}
	}
	return errs
}
