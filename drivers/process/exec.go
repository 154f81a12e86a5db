package process

import (
	"bytes"
	"context"
	"io"
	"os"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/engenho/engenho/drivers"
	"github.com/engenho/engenho/drivers/cgroup"
)

// maxExecOutput caps what Exec keeps of each stream; the rest is read and
// dropped so the probe never blocks on a full pipe.
const maxExecOutput = 64 << 10

// execDrain is how long Exec waits, after the probe exited, for its output
// pipes to close (a daemonised grandchild may hold them open).
const execDrain = time.Second

// Exec runs argv as the instance would run (its env, working directory and
// user) in a process group of its own, through the same spawner as
// workloads. ctx ending kills the probe's group (ErrTransient).
func (d *Driver) Exec(ctx context.Context, name string, argv []string) (drivers.ExecResult, error) {
	in, err := d.lockLive(opExec, name)
	if err != nil {
		return drivers.ExecResult{}, err
	}
	running, cg := in.proc != nil, in.cg
	pid := in.rec.Pid
	spec := cloneSpec(in.rec.Spec)
	hostPorts := in.rec.HostPorts
	in.mu.Unlock()
	if !running {
		return drivers.ExecResult{}, d.errorf(opExec, name, drivers.ErrInvalid, "instance is not running")
	}
	if len(argv) == 0 || argv[0] == "" {
		return drivers.ExecResult{}, d.errorf(opExec, name, drivers.ErrInvalid, "empty command")
	}
	spec.Command = argv
	prog, err := resolveCommand(spec)
	if err != nil {
		return drivers.ExecResult{}, drivers.Wrap(DriverName, opExec, name, drivers.ErrInvalid, err)
	}
	id, err := credentialFor(spec.User)
	if err != nil {
		return drivers.ExecResult{}, drivers.Wrap(DriverName, opExec, name, drivers.ErrInvalid, err)
	}
	env, dir := withSecretsDir(workloadEnv(spec, id, hostPorts), d.instanceSecretsDir(spec)), spec.WorkingDir
	if len(spec.Mounts) > 0 { // the probe sees what the workload sees (mounts.go)
		if prog, argv, id, err = execInNamespace(pid, dir, prog, argv, id); err != nil {
			return drivers.ExecResult{}, drivers.Wrap(DriverName, opExec, name, drivers.ErrInvalid, err)
		}
		dir = ""
	}
	return d.runProbe(ctx, name, prog, argv, dir, env, id, cg)
}

// runProbe runs argv as a probe of the instance, inside its cgroup when it
// has one (as `docker exec` runs in the container's): the probe counts
// against the instance's limits.
func (d *Driver) runProbe(ctx context.Context, name, prog string, argv []string, dir string, env []string, id identity, cg *cgroup.Group) (drivers.ExecResult, error) {
	transient := func(err error) (drivers.ExecResult, error) {
		return drivers.ExecResult{}, drivers.Wrap(DriverName, opExec, name, drivers.ErrTransient, err)
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		return transient(err)
	}
	defer outR.Close()
	errR, errW, err := os.Pipe()
	if err != nil {
		outW.Close()
		return transient(err)
	}
	defer errR.Close()

	exited := make(chan exitStatus, 1)
	attr := &syscall.ProcAttr{
		Dir:   dir,
		Env:   env,
		Files: []uintptr{d.null.Fd(), outW.Fd(), errW.Fd()},
		Sys:   &syscall.SysProcAttr{Setpgid: true, Credential: id.cred},
	}
	sp, err := d.r.spawn(prog, argv, attr, cg, false, func(st exitStatus) { exited <- st })
	outW.Close()
	errW.Close()
	if err != nil {
		return drivers.ExecResult{}, drivers.Wrap(DriverName, opExec, name, spawnKind(err), err)
	}

	var stdout, stderr capped
	var readers sync.WaitGroup
	readers.Add(2)
	go func() { defer readers.Done(); io.Copy(&stdout, outR) }()
	go func() { defer readers.Done(); io.Copy(&stderr, errR) }()

	var st exitStatus
	select {
	case st = <-exited:
	case <-ctx.Done():
		d.r.signalGroup(sp.proc, unix.SIGKILL)
		select { // the reaper reports the kill at once
		case <-exited:
		case <-d.done:
		}
		d.drain(&readers, outR, errR)
		return transient(ctx.Err())
	case <-d.done:
		d.r.signalGroup(sp.proc, unix.SIGKILL)
		d.drain(&readers, outR, errR)
		return drivers.ExecResult{}, d.errorf(opExec, name, drivers.ErrInvalid, "driver closed")
	}
	d.drain(&readers, outR, errR)
	code := st.code
	if st.signal != "" {
		code = -1
	}
	return drivers.ExecResult{ExitCode: code, Stdout: stdout.Bytes(), Stderr: stderr.Bytes()}, nil
}

// drain waits for both readers to reach EOF, closing the pipes after
// execDrain so a grandchild holding them cannot block Exec.
func (d *Driver) drain(readers *sync.WaitGroup, pipes ...*os.File) {
	done := make(chan struct{})
	go func() { readers.Wait(); close(done) }()
	t := d.clk.NewTimer(execDrain)
	defer t.Stop()
	select {
	case <-done:
		return
	case <-t.C():
	}
	for _, p := range pipes {
		p.Close()
	}
	<-done
}

// capped keeps the first maxExecOutput bytes written to it.
type capped struct{ bytes.Buffer }

func (c *capped) Write(p []byte) (int, error) {
	if room := maxExecOutput - c.Len(); room > 0 {
		c.Buffer.Write(p[:min(len(p), room)])
	}
	return len(p), nil
}

// Bytes returns what was kept; nil when nothing was written.
func (c *capped) Bytes() []byte {
	if c.Len() == 0 {
		return nil
	}
	return bytes.Clone(c.Buffer.Bytes())
}
