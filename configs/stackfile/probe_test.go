package stackfile

import (
	"reflect"
	"testing"
	"time"

	"github.com/engenho/engenho/drivers/probe"
)

// SVC-7: a stack file's healthcheck is probed as parsed (the stack file's
// own defaults included), the probe package filling what is still zero;
// no healthcheck probes nothing.
func TestSVC7ProbeConfigFromHealthcheck(t *testing.T) {
	cases := []struct {
		name string
		body string
		want probe.Config
	}{
		{"none", "", probe.Config{Kind: probe.KindNone}},
		{"disabled", "healthcheck: {disable: true}\n", probe.Config{Kind: probe.KindNone}},
		{"exec", "healthcheck: {test: [CMD, /bin/check, -q], interval: 7s, timeout: 3s, retries: 2, start_interval: 1s}\n",
			probe.Config{Kind: probe.KindExec, Command: []string{"/bin/check", "-q"}, Path: probe.DefaultPath, Interval: 7 * time.Second,
				Timeout: 3 * time.Second, Retries: 2, StartInterval: time.Second}},
		{"http", "ports: ['8080:80']\nhealthcheck: {http: {path: /healthz, port: 80}, interval: 4s, timeout: 2s, start_period: 9s}\n",
			probe.Config{Kind: probe.KindHTTP, Path: "/healthz", Port: 80, Interval: 4 * time.Second, Timeout: 2 * time.Second,
				Retries: 3, StartPeriod: 9 * time.Second, StartInterval: 2 * time.Second}},
	}
	for _, c := range cases {
		st := mustParse(t, c.name+".yaml", stackYAML(c.body, true))
		if got := st.Services["api"].ProbeConfig(); !reflect.DeepEqual(got, c.want) {
			t.Errorf("%s: %+v, want %+v", c.name, got, c.want)
		}
	}
}
