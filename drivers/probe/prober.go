package probe

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"syscall"

	"github.com/engenho/engenho/drivers"
	"github.com/engenho/engenho/drivers/clock"
)

// Target is the instance a probe runs against.
type Target struct {
	// Instance is the driver's instance name (exec probes).
	Instance string
	// Addresses maps published target ports to host addresses, as in
	// drivers.Status.Addresses (http and tcp probes).
	Addresses map[int]string
}

// Prober runs probes. It is safe for concurrent use and holds no
// connections between probes.
type Prober struct {
	driver drivers.Driver
	clock  clock.Clock
	client *http.Client
	dialer net.Dialer
}

// maxHeaderBytes bounds an http probe's response headers.
const maxHeaderBytes = 64 << 10

// errTimedOut is the cancel cause set when a probe's own timeout fires.
var errTimedOut = errors.New("probe timed out")

// NewProber returns a Prober that runs exec probes through driver (may be
// nil if no exec probe will run) and measures time with clk.
func NewProber(driver drivers.Driver, clk clock.Clock) *Prober {
	p := &Prober{driver: driver, clock: clk}
	transport := &http.Transport{
		Proxy:                  nil, // probes go straight to the instance
		DialContext:            p.dialer.DialContext,
		DisableKeepAlives:      true,
		MaxResponseHeaderBytes: maxHeaderBytes,
	}
	p.client = &http.Client{
		Transport: transport,
		// 3xx is healthy: report it, do not follow it.
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
	return p
}

// Probe runs cfg's probe against target. It returns within cfg.Timeout
// (measured on the Prober's clock) or when ctx ends, whichever is first. A
// probe that times out is Unhealthy; one abandoned because ctx ended, or
// that cannot run, is Error.
func (p *Prober) Probe(ctx context.Context, cfg Config, target Target) Result {
	cfg = cfg.WithDefaults()
	start := p.clock.Now()
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	timer := p.clock.AfterFunc(cfg.Timeout, func() { cancel(errTimedOut) })
	defer timer.Stop()

	var r Result
	switch cfg.Kind {
	case KindExec:
		r = p.exec(ctx, cfg, target)
	case KindHTTP:
		r = p.http(ctx, cfg, target)
	case KindTCP:
		r = p.tcp(ctx, cfg, target)
	default:
		r = Result{Outcome: Error, Output: fmt.Sprintf("no probe of kind %q", cfg.Kind)}
	}
	if ctx.Err() != nil && r.Outcome != Healthy {
		r = interrupted(ctx, cfg)
	}
	r.Output = boundOutput(r.Output)
	r.At = start
	r.Duration = p.clock.Since(start)
	return r
}

// interrupted is the result of a probe cut short: by its own timeout
// (unhealthy, as in Compose) or by the caller (could not run).
func interrupted(ctx context.Context, cfg Config) Result {
	if errors.Is(context.Cause(ctx), errTimedOut) {
		return Result{Outcome: Unhealthy, Output: fmt.Sprintf("timed out after %s", cfg.Timeout)}
	}
	return Result{Outcome: Error, Output: "probe abandoned: " + context.Cause(ctx).Error()}
}

func (p *Prober) exec(ctx context.Context, cfg Config, target Target) Result {
	if p.driver == nil {
		return Result{Outcome: Error, Output: "exec probe: no driver"}
	}
	type reply struct {
		res drivers.ExecResult
		err error
	}
	// The driver honours ctx by contract; the goroutine only guarantees
	// that a driver which does not still cannot hold the probe past its
	// timeout. It ends when the driver call returns.
	done := make(chan reply, 1)
	argv := slices.Clone(cfg.Command)
	go func() {
		res, err := p.driver.Exec(ctx, target.Instance, argv)
		done <- reply{res, err}
	}()
	var rep reply
	select {
	case rep = <-done:
	case <-ctx.Done():
		return interrupted(ctx, cfg)
	}
	if rep.err != nil {
		return Result{Outcome: Error, Output: "exec probe could not run: " + rep.err.Error()}
	}
	output := string(rep.res.Stdout) + string(rep.res.Stderr)
	if rep.res.ExitCode == 0 {
		return Result{Outcome: Healthy, Output: output}
	}
	if strings.TrimSpace(output) == "" {
		output = fmt.Sprintf("exit code %d", rep.res.ExitCode)
	}
	return Result{Outcome: Unhealthy, Output: output}
}

func (p *Prober) http(ctx context.Context, cfg Config, target Target) Result {
	addr, err := resolveAddr(cfg, target)
	if err != nil {
		return Result{Outcome: Error, Output: err.Error()}
	}
	reqURL := "http://" + addr + cfg.Path
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, reqURL, nil)
	if err != nil {
		return Result{Outcome: Error, Output: fmt.Sprintf("http probe: bad request %s: %v", reqURL, err)}
	}
	req.Header.Set("User-Agent", "engenho-probe")
	resp, err := p.client.Do(req)
	if err != nil {
		if ownFault(err) {
			return Result{Outcome: Error, Output: fmt.Sprintf("http probe could not run: GET %s: %v", reqURL, unwrapURLError(err))}
		}
		// The instance did not answer (refused, reset, bad response).
		return Result{Outcome: Unhealthy, Output: fmt.Sprintf("GET %s: %v", reqURL, unwrapURLError(err))}
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, MaxOutput))
	output := fmt.Sprintf("HTTP %s\n%s", resp.Status, body)
	if resp.StatusCode >= 200 && resp.StatusCode < 400 {
		return Result{Outcome: Healthy, Output: output}
	}
	return Result{Outcome: Unhealthy, Output: output}
}

func (p *Prober) tcp(ctx context.Context, cfg Config, target Target) Result {
	addr, err := resolveAddr(cfg, target)
	if err != nil {
		return Result{Outcome: Error, Output: err.Error()}
	}
	conn, err := p.dialer.DialContext(ctx, "tcp", addr)
	if err != nil {
		if ownFault(err) {
			return Result{Outcome: Error, Output: fmt.Sprintf("tcp probe could not run: connect %s: %v", addr, err)}
		}
		return Result{Outcome: Unhealthy, Output: fmt.Sprintf("connect %s: %v", addr, err)}
	}
	conn.Close()
	return Result{Outcome: Healthy, Output: "connected to " + addr}
}

// resolveAddr finds the host address of cfg.Port, or of the lowest
// published port when cfg.Port is 0.
func resolveAddr(cfg Config, target Target) (string, error) {
	if cfg.Port != 0 {
		addr, ok := target.Addresses[cfg.Port]
		if !ok || addr == "" {
			return "", fmt.Errorf("%s probe: instance %s publishes no port %d", cfg.Kind, target.Instance, cfg.Port)
		}
		return addr, nil
	}
	ports := make([]int, 0, len(target.Addresses))
	for port, addr := range target.Addresses {
		if addr != "" {
			ports = append(ports, port)
		}
	}
	if len(ports) == 0 {
		return "", fmt.Errorf("%s probe: instance %s publishes no port", cfg.Kind, target.Instance)
	}
	return target.Addresses[slices.Min(ports)], nil
}

// ownFault reports whether a probe's connection failed for want of the
// daemon's own resources (no file descriptor, no buffer, no memory for a
// socket): that says nothing of the workload, so the probe could not run
// (SUP-14) instead of counting as unhealthy. Found by the chaos fault
// daemon.fd-limit, which had healthy replicas restarted for the daemon's
// own exhausted descriptors.
func ownFault(err error) bool {
	return errors.Is(err, syscall.EMFILE) || errors.Is(err, syscall.ENFILE) ||
		errors.Is(err, syscall.ENOBUFS) || errors.Is(err, syscall.ENOMEM)
}

// unwrapURLError drops the *url.Error wrapper, which repeats the URL.
func unwrapURLError(err error) error {
	if u, ok := errors.AsType[*url.Error](err); ok {
		return u.Err
	}
	return err
}
