package daemon

import (
	"os"
	"strconv"

	"github.com/engenho/engenho/drivers/process"
	"github.com/engenho/engenho/runtime/logging"
)

// listenEnv is systemd's socket activation protocol (sd_listen_fds).
var listenEnv = []string{"LISTEN_FDS", "LISTEN_PID", "LISTEN_FDNAMES"}

// cleanInheritance keeps what the daemon inherited from whoever started it
// away from workloads and probes: every inherited descriptor above stderr
// is marked close-on-exec, and the socket activation variables are
// removed. Socket activation is not supported: the daemon creates its own
// control socket, so descriptors passed that way are left unused (still
// open, never passed on) and the operator is told.
func cleanInheritance(log *logging.Logger) {
	fds, err := process.MarkInheritedCloseOnExec()
	if err != nil {
		log.Error().Err(err).Ints("marked", fds).Msg("cannot mark inherited descriptors close-on-exec; workloads may inherit them")
	} else if len(fds) > 0 {
		log.Info().Ints("fds", fds).Msg("descriptors inherited at start marked close-on-exec: no workload or probe receives them")
	}
	if pid, _ := strconv.Atoi(os.Getenv("LISTEN_PID")); pid == os.Getpid() {
		log.Warn().Str("listen_fds", os.Getenv("LISTEN_FDS")).Str("listen_fdnames", os.Getenv("LISTEN_FDNAMES")).
			Msg("socket activation is not supported; the passed descriptors are not used (the control socket is DATA/control/engenho.sock)")
	}
	for _, k := range listenEnv {
		os.Unsetenv(k)
	}
}
