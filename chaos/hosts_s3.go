package chaos

import (
	"context"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"strings"
	"time"

	"github.com/engenho/engenho/chaos/faultproxy"
	"github.com/engenho/engenho/chaos/schedule"
)

// s3Proxy starts a fault proxy in front of the S3 server at endpoint, for
// one node of the S3 pair.
func s3Proxy(endpoint string) (*faultproxy.Proxy, error) {
	u, err := url.Parse(endpoint)
	if err != nil || u.Host == "" {
		return nil, fmt.Errorf("ENGENHO_S3_ENDPOINT %q is not a URL", endpoint)
	}
	return faultproxy.Start(faultproxy.Config{Listen: faultproxy.TCP("127.0.0.1:0"), Target: faultproxy.TCP(u.Host)})
}

// s3RestartEnv names the command that restarts the S3 server the
// campaign uses (.ci/run sets it to .ci/minio.sh restart); without it
// s3.restart is not drawn.
const s3RestartEnv = "ENGENHO_S3_RESTART"

// s3Fault is the proxy fault of an S3 fault kind.
func s3Fault(f schedule.Fault) (faultproxy.Fault, string) {
	n := max(1, f.Param("count"))
	switch f.Kind {
	case schedule.S3Error:
		if f.Params["code"] == "500" {
			return faultproxy.S3InternalError().Times(n), fmt.Sprintf("500 InternalError ×%d", n)
		}
		return faultproxy.S3SlowDown().Times(n), fmt.Sprintf("503 SlowDown ×%d", n)
	case schedule.S3Latency:
		d := time.Duration(f.Param("delay_ms")) * time.Millisecond
		return faultproxy.LatencyFault(d).During(5 * time.Second), fmt.Sprintf("latency %s for 5s", d)
	case schedule.S3Reset:
		return faultproxy.ResetFault(int64(f.Param("after"))).Times(n), fmt.Sprintf("connections reset after %d bytes ×%d", f.Param("after"), n)
	case schedule.S3Truncate:
		return faultproxy.TruncateFault(faultproxy.Half).On("GET", "").Times(n), fmt.Sprintf("GET bodies cut in half ×%d", n)
	}
	return faultproxy.Fault{}, ""
}

// injectS3 arms an S3 fault on node x's proxy, on the wire below the SDK,
// then visits the host through x (with the host asleep or awake), so a
// wake, a restore, a checkpoint or a renew meets it: the SDK's retries and
// our own timeouts are exercised for real. The fault is disarmed at the
// end; single-awake is polled throughout by awaitHost.
func (c *campaign) injectS3(ctx context.Context, f schedule.Fault, p *hostPair, x int, inj *injected) error {
	if len(p.proxies) != len(p.nodes) {
		return errSkip{"the pair has no S3 proxies"}
	}
	px := p.proxies[x]
	fault, what := s3Fault(f)
	if _, err := px.Arm(fault); err != nil {
		return err
	}
	inj.cleanup = func(context.Context) string {
		st := px.Stats()
		px.Clear()
		return fmt.Sprintf("proxy: %d requests, applied %v", st.Requests, st.Applied)
	}
	inj.detail = what + " on " + p.nodes[x].name + "'s way to S3, then a request"
	vs, err := c.visitCounted(ctx, p, x)
	inj.violations = append(inj.violations, vs...)
	if err != nil {
		inj.detail += " (answered: " + err.Error() + ")"
	}
	return nil
}

// injectS3Partition wakes the host through node x, then cuts x off from
// S3 (its proxy holds every request unanswered: a partition, not a
// refusal) for longer than the lease's TTL, visiting through the other
// node meanwhile: x cannot renew, must fence itself by its own clock
// (ACT-14) and stand down; the other node takes the host over once the
// lease has expired. Then the partition heals.
func (c *campaign) injectS3Partition(ctx context.Context, f schedule.Fault, p *hostPair, x int, inj *injected) error {
	if len(p.proxies) != len(p.nodes) {
		return errSkip{"the pair has no S3 proxies"}
	}
	v, err := c.visitPatiently(ctx, p, x)
	if err != nil {
		return fmt.Errorf("waking the host through %s: %w", p.nodes[x].name, err)
	}
	inj.violations = append(inj.violations, p.checkVisit(v)...)
	if err := sleep(ctx, 2*time.Second); err != nil { // the stream class ships the visit
		return err
	}
	px := p.proxies[x]
	cut := hostLeaseW + 10*time.Second
	if _, err := px.Arm(faultproxy.BlackholeFault(cut)); err != nil {
		return err
	}
	inj.cleanup = func(context.Context) string { px.Clear(); return "" }
	v, err = c.visitPatiently(ctx, p, 1-x)
	if err != nil {
		return fmt.Errorf("%s cut off from S3: the host did not move to %s: %w", p.nodes[x].name, p.nodes[1-x].name, err)
	}
	inj.violations = append(inj.violations, p.checkVisit(v)...)
	inj.detail = fmt.Sprintf("%s cut off from S3 (requests held unanswered) with the host awake; %s took it over", p.nodes[x].name, p.nodes[1-x].name)
	return nil
}

// injectS3Restart restarts the S3 server (ENGENHO_S3_RESTART) while the
// host is woken through node x: calls in flight fail, and the daemons must
// ride it out (retries, a wake that fails with 503 and is asked again).
func (c *campaign) injectS3Restart(ctx context.Context, p *hostPair, x int, inj *injected) error {
	cmdline := os.Getenv(s3RestartEnv)
	if cmdline == "" {
		return errSkip{s3RestartEnv + " is not set"}
	}
	done := make(chan error, 1)
	go func() {
		out, err := exec.CommandContext(ctx, "/bin/sh", "-c", cmdline).CombinedOutput()
		if err != nil {
			err = fmt.Errorf("%s: %w: %s", cmdline, err, strings.TrimSpace(string(out)))
		}
		done <- err
	}()
	// Meet the restart with a wake, or a request, through x.
	v, verr := c.visit(ctx, p, x, 20*time.Second)
	if err := <-done; err != nil {
		return err
	}
	if verr == nil {
		inj.violations = append(inj.violations, p.checkVisit(v)...)
	}
	inj.detail = "the S3 server restarted while a request went through " + p.nodes[x].name + ": " + answer(verr)
	return nil
}
