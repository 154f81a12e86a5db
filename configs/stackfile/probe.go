package stackfile

import "github.com/engenho/engenho/drivers/probe"

// ProbeConfig is the service's healthcheck as the prober runs it (SVC-7),
// the probe package's defaults filled in; KindNone without a healthcheck.
// Service replicas and hibernating hosts both probe with it.
func (s Service) ProbeConfig() probe.Config {
	h := s.Healthcheck
	kinds := map[ProbeKind]probe.Kind{ProbeExec: probe.KindExec, ProbeHTTP: probe.KindHTTP, ProbeTCP: probe.KindTCP}
	kind, ok := kinds[h.Kind]
	if !ok {
		return probe.Config{Kind: probe.KindNone}
	}
	return probe.Config{Kind: kind, Command: h.Exec, Path: h.Path, Port: h.Port, Interval: h.Interval,
		Timeout: h.Timeout, Retries: h.Retries, StartPeriod: h.StartPeriod, StartInterval: h.StartInterval}.WithDefaults()
}
