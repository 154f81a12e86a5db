package daemonconfig

import (
	"net"
	"net/url"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/engenho/engenho/drivers/objstore"
	"github.com/engenho/engenho/drivers/ports"
)

// systemdStopTimeout is systemd's default TimeoutStopSec; a drain budget
// past it gets a warning (DMN-8).
const systemdStopTimeout = 90 * time.Second

// Bounds of values that would otherwise make the daemon useless or spin.
const (
	minSweep      = 100 * time.Millisecond
	minUsage      = time.Second
	minMaxRequest = 4 * KiB
	maxMaxRequest = 64 * MiB
	minLogMax     = 4 * KiB
	minPartSize   = 5 * MiB // S3's smallest multipart part
	maxNodeName   = 253
)

// validate checks every value's range and the rules between keys.
func (p *parser) validate(c *Config) {
	p.validateNode(c)
	if c.DataDir == "" {
		p.failKey("data_dir", "must not be empty")
	}
	if _, err := ParseLevel(c.Log.Level); err != nil {
		p.failKey("log.level", "want trace, debug, info, warn or error, got %s", quote(c.Log.Level))
	}
	p.oneOf("log.format", c.Log.Format, "auto", "json", "console")
	p.validateStacks(c)
	p.validateControl(c)
	p.validateDrivers(c)
	if _, err := ports.ParseRange(c.Ports.InstanceRange); err != nil {
		p.failKey("ports.instance_range", "want %s, got %s", ports.RangeForm, quote(c.Ports.InstanceRange))
	}
	p.validateObjstore(c)
	p.listen("edge.listen", c.Edge.Listen)
	p.listen("metrics.listen", c.Metrics.Listen)
	if c.Edge.Listen != "" && c.Edge.Listen == c.Metrics.Listen {
		p.failKey("metrics.listen", "is the same address as edge.listen")
	}
	p.validateSupervision(c)
	p.atLeast("sweep.interval", c.Sweep.Interval, minSweep)
	if c.Usage.Interval != 0 && c.Usage.Interval < minUsage {
		p.failKey("usage.interval", "must be 0 (off) or at least %s, got %s", minUsage, c.Usage.Interval)
	}
	p.positive("probe.interval", c.Probe.Interval)
	p.positive("probe.timeout", c.Probe.Timeout)
	p.positive("probe.start_interval", c.Probe.StartInterval)
	if c.Probe.Retries < 1 {
		p.failKey("probe.retries", "must be at least 1, got %d", c.Probe.Retries)
	}
	p.positive("drain.budget", c.Drain.Budget)
	p.positive("boot.step_timeout", c.Boot.StepTimeout)
	if c.Journal.Events.MaxCount < 0 {
		p.failKey("journal.events.max_count", "must not be negative (0 means no bound), got %d", c.Journal.Events.MaxCount)
	}
	if c.Journal.Reserve < 0 {
		p.failKey("journal.reserve", "must not be negative (0 means the default, 112MiB), got %s", c.Journal.Reserve)
	}
	if c.Journal.Events.MaxAge < 0 {
		p.failKey("journal.events.max_age", "must not be negative (0 means no bound), got %s", c.Journal.Events.MaxAge)
	}
	if c.Chaos.Enabled && !p.chaosBuild {
		p.failKey("chaos.enabled", "this engenho was built without -tags chaos: it has no fault hooks to enable; "+
			"set it false or remove it, or run the chaos build (go build -tags chaos ./cmd/engenho)")
	}
}

func (p *parser) validateNode(c *Config) {
	n := c.Node.Name
	if len(n) > maxNodeName {
		p.failKey("node.name", "%d characters long, at most %d", len(n), maxNodeName)
		return
	}
	if !validNodeName(n) {
		p.failKey("node.name", "%s: want letters, digits, '.', '-' and '_', starting with a letter or digit", quote(n))
	}
}

// validNodeName accepts a hostname-like name; it is used in lease records
// and events, never as a path, but stays path-safe anyway (SEC-3).
func validNodeName(n string) bool {
	if n == "" {
		return false
	}
	for i := 0; i < len(n); i++ {
		c := n[i]
		alnum := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
		if i == 0 && !alnum {
			return false
		}
		if !alnum && c != '.' && c != '-' && c != '_' {
			return false
		}
	}
	return true
}

func (p *parser) validateStacks(c *Config) {
	for i, s := range c.Stacks {
		key := "stacks[" + strconv.Itoa(i) + "]"
		if s == "" {
			p.failKey(key, "empty path")
			continue
		}
		if _, err := filepath.Match(s, ""); err != nil {
			p.failKey(key, "bad glob pattern %s", quotePath(s))
		}
	}
}

func (p *parser) validateControl(c *Config) {
	if g := c.Control.Group; g != "" && !validGroup(g) {
		p.failKey("control.group", "%s is not a group name or gid (a name of at most 32 characters, or a number)", quote(g))
	}
	p.positive("control.idle_timeout", c.Control.IdleTimeout)
	if m := c.Control.MaxRequest; m < minMaxRequest || m > maxMaxRequest {
		p.failKey("control.max_request", "must be within %s..%s, got %s", minMaxRequest, maxMaxRequest, m)
	}
}

// validGroup accepts a POSIX-portable group name or a numeric gid.
func validGroup(g string) bool {
	if len(g) > 32 {
		return false
	}
	for i := 0; i < len(g); i++ {
		c := g[i]
		ok := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '.' || (c == '-' && i > 0)
		if !ok {
			return false
		}
	}
	return true
}

func (p *parser) validateDrivers(c *Config) {
	pr, in := c.Drivers.Process, c.Drivers.Incus
	if !pr.Enabled && !in.Enabled {
		p.failKey("drivers.process.enabled", "no driver is enabled: enable drivers.process or drivers.incus")
	}
	if pr.LogMaxBytes < minLogMax {
		p.failKey("drivers.process.log_max_bytes", "must be at least %s, got %s", minLogMax, pr.LogMaxBytes)
	}
	if pr.LogFiles < 1 {
		p.failKey("drivers.process.log_files", "must be at least 1, got %d", pr.LogFiles)
	}
	if r := pr.CgroupRoot; r == "" || filepath.IsAbs(r) || filepath.Clean(r) != r || strings.HasPrefix(r, "..") {
		p.failKey("drivers.process.cgroup_root", "want a clean relative path below each cgroup hierarchy, like engenho, got %s", quotePath(r))
	}
	if in.RemoteURL == "" {
		if !filepath.IsAbs(in.Socket) {
			p.failKey("drivers.incus.socket", "must be an absolute path, got %s", quotePath(in.Socket))
		}
		return
	}
	u, err := url.Parse(in.RemoteURL)
	if err != nil || u.Scheme != "https" || u.Host == "" || u.User != nil {
		p.failKey("drivers.incus.remote_url", "want an https://HOST[:PORT] URL without credentials")
	}
	if in.ClientCert == "" {
		p.failKey("drivers.incus.client_cert", "required with drivers.incus.remote_url")
	}
	if in.ClientKey == "" {
		p.failKey("drivers.incus.client_key", "required with drivers.incus.remote_url")
	}
}

func (p *parser) validateObjstore(c *Config) {
	o := c.Objstore
	p.oneOf("objstore.kind", o.Kind, "fs", "s3")
	if o.Prefix != "" {
		if err := objstore.ValidKey(o.Prefix); err != nil {
			p.failKey("objstore.prefix", "%v", err)
		}
	}
	if o.Kind != "s3" {
		return
	}
	s := o.S3
	if s.Bucket == "" {
		p.failKey("objstore.s3.bucket", "required when objstore.kind is s3")
	}
	if s.Endpoint != "" {
		u, err := url.Parse(s.Endpoint)
		switch {
		case err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "":
			// Not quoted: an endpoint may carry credentials by mistake.
			p.failKey("objstore.s3.endpoint", "want an http or https URL with a host")
		case u.User != nil:
			p.failKey("objstore.s3.endpoint", "must not carry credentials; set access_key and secret_key")
		}
	}
	if (s.AccessKey == "") != (s.SecretKey == "") {
		p.failKey("objstore.s3.secret_key", "access_key and secret_key go together: set both, or neither for the AWS default chain")
	}
	if s.SessionToken != "" && s.AccessKey == "" {
		p.failKey("objstore.s3.session_token", "needs access_key and secret_key")
	}
	if s.PartSize != 0 && s.PartSize < minPartSize {
		p.failKey("objstore.s3.part_size", "must be at least %s (S3's smallest part), got %s", minPartSize, s.PartSize)
	}
	if s.MaxAttempts < 0 {
		p.failKey("objstore.s3.max_attempts", "must not be negative, got %d", s.MaxAttempts)
	}
}

func (p *parser) validateSupervision(c *Config) {
	s := c.Supervision
	p.oneOf("supervision.strategy", s.Strategy, "one_for_one", "one_for_all", "rest_for_one")
	if s.MaxRestarts < 0 {
		p.failKey("supervision.max_restarts", "must not be negative, got %d", s.MaxRestarts)
	}
	p.positive("supervision.period", s.Period)
	l := s.Ladder
	if l.Immediate < 0 {
		p.failKey("supervision.ladder.immediate", "must not be negative, got %d", l.Immediate)
	}
	for i, d := range l.Delays {
		if d <= 0 {
			p.failKey("supervision.ladder.delays["+strconv.Itoa(i)+"]", "must be positive, got %s", d)
		}
	}
	p.positive("supervision.ladder.cap", l.Cap)
	p.positive("supervision.ladder.stable", l.Stable)
	if l.Jitter < 0 || l.Jitter > 1 {
		p.failKey("supervision.ladder.jitter", "must be within 0..1, got %g", l.Jitter)
	}
}

// listen checks a host:port listen address; empty means off.
func (p *parser) listen(key, addr string) {
	if addr == "" {
		return
	}
	_, port, err := net.SplitHostPort(addr)
	if err != nil {
		p.failKey(key, "want HOST:PORT (e.g. 127.0.0.1:8088, or :8088 for every interface), got %s", quote(addr))
		return
	}
	n, err := strconv.Atoi(port)
	if err != nil || n < 0 || n > 65535 {
		p.failKey(key, "port %s: want a number within 0..65535", quote(port))
	}
}

func (p *parser) oneOf(key, v string, allowed ...string) {
	for _, a := range allowed {
		if v == a {
			return
		}
	}
	p.failKey(key, "want one of %v, got %s", allowed, quote(v))
}

func (p *parser) positive(key string, d time.Duration) {
	if d <= 0 {
		p.failKey(key, "must be positive, got %s", d)
	}
}

func (p *parser) atLeast(key string, d, least time.Duration) {
	if d < least {
		p.failKey(key, "must be at least %s, got %s", least, d)
	}
}
