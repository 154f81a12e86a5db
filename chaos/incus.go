package chaos

import (
	"context"
	"fmt"
	"path/filepath"
	"syscall"
	"time"

	"github.com/engenho/engenho/chaos/faultproxy"
	"github.com/engenho/engenho/chaos/schedule"
)

// startIncusProxy puts a fault proxy between node a's incus driver and
// incusd (issue 18: a slow or failing incus API, on the wire).
func (c *campaign) startIncusProxy() error {
	px, err := faultproxy.Start(faultproxy.Config{Listen: faultproxy.Unix(filepath.Join(c.work, "incus.sock")),
		Target: faultproxy.Unix(incusSocket)})
	if err != nil {
		return fmt.Errorf("%w: the incus fault proxy: %v", ErrSetup, err)
	}
	c.incusProxy = px
	return nil
}

// injectIncusAPI arms a fault on the incus API of node a (500 answers in
// incus's own error shape, or latency), then kills a box container's init
// so the driver's recovery (inspect, start) meets it.
func (c *campaign) injectIncusAPI(ctx context.Context, f schedule.Fault, before observation, inj *injected) error {
	if c.incusProxy == nil {
		return errSkip{"no incus proxy"}
	}
	var fault faultproxy.Fault
	var what string
	switch f.Kind {
	case schedule.IncusAPIError:
		n := max(1, f.Param("count"))
		fault, what = faultproxy.IncusError(500, "chaos: injected").Times(n), fmt.Sprintf("incus API answers 500 ×%d", n)
	default:
		d := time.Duration(f.Param("delay_ms")) * time.Millisecond
		fault, what = faultproxy.LatencyFault(d).During(10*time.Second), fmt.Sprintf("incus API %s slower for 10s", d)
	}
	if _, err := c.incusProxy.Arm(fault); err != nil {
		return err
	}
	inj.cleanup = func(context.Context) string {
		st := c.incusProxy.Stats()
		c.incusProxy.Clear()
		return fmt.Sprintf("proxy: %d requests, applied %v", st.Requests, st.Applied)
	}
	if err := c.killInstance(f, before, "incus", inj); err != nil {
		c.incusProxy.Clear()
		return err
	}
	inj.detail = what + ", then " + inj.detail
	return nil
}

// injectIncusRestart kills a box container's init and restarts incusd
// right after (SIGTERM: a clean restart, or SIGKILL: a crash), so the
// driver's recovery of the container meets incusd going away and coming
// back. Running containers survive an incusd restart.
func (c *campaign) injectIncusRestart(ctx context.Context, f schedule.Fault, before observation, inj *injected) error {
	sig := syscall.SIGTERM
	if f.Param("kill") == 1 {
		sig = syscall.SIGKILL
	}
	if err := c.killInstance(f, before, "incus", inj); err != nil {
		return err
	}
	r, err := restartIncusd(ctx, incusSocket, sig)
	if err != nil {
		return err
	}
	inj.detail += fmt.Sprintf(", then incusd restarted with %s (pid %d -> %d, answering again after %s)", sig, r.OldPid, r.NewPid, r.Took.Round(time.Millisecond))
	return nil
}
