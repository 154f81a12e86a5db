package checkpoint

// SetFetch sets how a restore downloads: chunk bytes per ranged GET,
// parallel GETs in flight, at most ahead bytes fetched but not yet hashed
// (PERF-5; benchmarks compare settings, tests make pieces small).
func SetFetch(cfg *Config, chunk int64, parallel int, ahead int64) {
	cfg.fetch = fetchTuning{chunk: chunk, parallel: parallel, ahead: ahead}
}
