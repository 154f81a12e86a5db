package stackfile

import (
	"fmt"
	"sort"
	"strconv"
	"strings"

	"github.com/engenho/engenho/drivers"
)

// LabelSidecar is stored on a sidecar's instance, beside the labels of
// SVC-3, with the sidecar's name.
const LabelSidecar = "engenho.sidecar"

// LabelContainerName holds a service's container_name on its instance.
const LabelContainerName = "engenho.container_name"

// LabelPrefix starts every label engenho sets; user labels may not.
const LabelPrefix = "engenho."

// Instance is what varies between the instances of one service: where it
// sits and what the node gave it. The service actor fills it in.
type Instance struct {
	Stack string
	// Slot is 1..replicas (SVC-3).
	Slot int
	// ID tells apart the instances that have held the slot; see
	// ValidInstanceID.
	ID string
	// Deployment is the id of the deployment that created the instance.
	Deployment string
	// HostPorts maps a target port to the host port allocated to this
	// instance; a target without one gets HostPort 0.
	HostPorts map[int]int
	// Bin is the engenho binary's path, substituted for ${ENGENHO_BIN}.
	Bin string
}

// InstanceName is STACK-SERVICE-SLOT-ID (SVC-3). A service name's "_"
// (Compose allows it; incus instance names and host names do not) is
// written "-": Check refuses two services whose names meet that way.
func InstanceName(stack, service string, slot int, id string) string {
	return stack + "-" + instanceService(service) + "-" + strconv.Itoa(slot) + "-" + id
}

// SidecarName is STACK-SERVICE-SLOT-SIDECAR-ID. A sidecar's name starts
// with a letter, so it never reads as an instance's slot number.
func SidecarName(stack, service string, slot int, sidecar, id string) string {
	return stack + "-" + instanceService(service) + "-" + strconv.Itoa(slot) + "-" + sidecar + "-" + id
}

// instanceService is a service name as instance names write it.
func instanceService(service string) string {
	return strings.ReplaceAll(service, "_", "-")
}

// userLabels is svc's labels under engenho's own, which win (Check
// already refuses user keys with the engenho. prefix).
func userLabels(svc Service, own drivers.Labels) drivers.Labels {
	if len(svc.Labels) == 0 && svc.ContainerName == "" {
		return own
	}
	out := drivers.Labels{}
	for k, v := range svc.Labels {
		out[k] = v
	}
	if svc.ContainerName != "" {
		out[LabelContainerName] = svc.ContainerName
	}
	for k, v := range own {
		out[k] = v
	}
	return out
}

// InstanceLabels are the labels of SVC-3 for one instance.
func InstanceLabels(stack, service string, slot int, revision, deployment string) drivers.Labels {
	return drivers.Labels{
		drivers.LabelStack:      stack,
		drivers.LabelService:    service,
		drivers.LabelSlot:       strconv.Itoa(slot),
		drivers.LabelRevision:   revision,
		drivers.LabelDeployment: deployment,
	}
}

// InstanceSpec renders the driver spec of one instance of svc: argv with
// ${ENGENHO_*} substituted, the env with real secret values plus
// ENGENHO_STACK, ENGENHO_SERVICE, ENGENHO_SLOT and ENGENHO_INSTANCE, and
// the labels of SVC-3. The actors create instances from it, and Validate
// hands the same spec to the driver (with secrets withheld).
//
// The spec holds secret values: never log it.
func InstanceSpec(svc Service, inst Instance) drivers.Spec {
	name := InstanceName(inst.Stack, svc.Name, inst.Slot, inst.ID)
	vars := instanceVars(svc, inst, name)
	spec := drivers.Spec{
		Name:       name,
		Labels:     userLabels(svc, InstanceLabels(inst.Stack, svc.Name, inst.Slot, svc.Revision(), inst.Deployment)),
		Command:    expand(svc.Argv(), vars),
		Image:      svc.Image,
		Env:        instanceEnv(vars, svc.Env, nil),
		SecretEnv:  secretKeys(svc.Env, nil),
		WorkingDir: svc.WorkingDir,
		User:       svc.User,
		Secrets:    specSecrets(svc.Secrets),
		Resources: drivers.Resources{
			CPUs:                   svc.Deploy.Resources.CPUs,
			MemoryBytes:            svc.Deploy.Resources.MemoryBytes,
			MemoryReservationBytes: svc.Deploy.Resources.MemoryReservationBytes,
			Pids:                   svc.Deploy.Resources.Pids,
		},
		Mounts: svc.Mounts(),
	}
	for _, p := range svc.Ports {
		spec.Ports = append(spec.Ports, drivers.Port{Target: p.Target, HostPort: inst.HostPorts[p.Target], Protocol: p.Protocol})
	}
	return spec
}

// SidecarSpec renders the driver spec of sidecar sc of svc beside the
// instance in inst's slot (inst.ID is the sidecar instance's own id). It
// runs with the service's image, user and working directory (unless it
// sets its own), and the service's env with its own on top.
func SidecarSpec(svc Service, sc Sidecar, inst Instance) drivers.Spec {
	name := SidecarName(inst.Stack, svc.Name, inst.Slot, sc.Name, inst.ID)
	vars := instanceVars(svc, inst, name)
	labels := InstanceLabels(inst.Stack, svc.Name, inst.Slot, svc.SidecarRevision(sc), inst.Deployment)
	labels[LabelSidecar] = sc.Name
	labels = userLabels(Service{Labels: svc.Labels}, labels)
	wd := svc.WorkingDir
	if sc.WorkingDir != "" {
		wd = sc.WorkingDir
	}
	return drivers.Spec{
		Name:       name,
		Labels:     labels,
		Command:    expand(sc.Command, vars),
		Image:      svc.Image,
		Env:        instanceEnv(vars, svc.Env, sc.Env),
		SecretEnv:  secretKeys(svc.Env, sc.Env),
		WorkingDir: wd,
		User:       svc.User,
		// A sidecar sees the service's volumes: it works on the same data
		// (a backup, a log shipper, a migration).
		Mounts:  svc.Mounts(),
		Secrets: specSecrets(svc.Secrets),
	}
}

func instanceVars(svc Service, inst Instance, name string) map[string]string {
	return map[string]string{
		VarBin:      inst.Bin,
		VarStack:    inst.Stack,
		VarService:  svc.Name,
		VarSlot:     strconv.Itoa(inst.Slot),
		VarInstance: name,
	}
}

// instanceEnv merges the env layers (later wins) and engenho's own.
func instanceEnv(vars map[string]string, layers ...Env) map[string]string {
	env := map[string]string{}
	for _, layer := range layers {
		for k, v := range layer {
			env[k] = v.value
		}
	}
	for _, k := range reservedEnv {
		env[k] = vars[k]
	}
	return env
}

// secretKeys names, sorted, the variables a secret value of any layer
// sets: the driver keeps them sealed (drivers.Spec.SecretEnv).
func secretKeys(layers ...Env) []string {
	seen := map[string]bool{}
	for _, layer := range layers {
		for k, v := range layer {
			if v.secret {
				seen[k] = true
			}
		}
	}
	if len(seen) == 0 {
		return nil
	}
	keys := make([]string, 0, len(seen))
	for k := range seen {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// String of an Instance names it; it holds nothing secret.
func (i Instance) String() string {
	return fmt.Sprintf("%s slot %d id %s", i.Stack, i.Slot, i.ID)
}
