package incus

import (
	"fmt"
	"strings"
)

// Files the driver keeps inside a container that runs Spec.Command.
const (
	stateDir       = "/.engenho"
	entrypointPath = stateDir + "/entrypoint"
	outputName     = "output.log"
	exitCodeName   = "exit-code"
	// initConfig makes the entrypoint the container's init (raw.lxc).
	initConfig = "lxc.init.cmd = " + entrypointPath
)

// entrypoint is the POSIX sh script that runs as a container's init when
// the spec has a Command. It
//   - brings loopback up (spec DRV-7: nothing listens on 127.0.0.1 before),
//   - appends stdout and stderr, in order, to DIR/output.log, rotating it to
//     output.log.1 when it grows past maxLog (copy then truncate, checked at
//     start and every 10s),
//   - runs argv in dir (when set) as a child, passing SIGTERM, SIGPWR (what
//     incusd sends for a clean stop) and SIGINT on as SIGTERM to its process
//     group (the command and what it started), as the process driver does,
//   - with waitSecrets, waits for the driver to deliver the secret files
//     (see waitSecretsScript),
//   - writes the child's exit status to DIR/exit-code and exits with it, so
//     the container stops when the command ends.
//
// A container killed outright (SIGKILL, forced stop) leaves no exit-code.
func entrypoint(dir string, argv []string, workDir string, maxLog int64, waitSecrets bool) string {
	var b strings.Builder
	w := func(format string, args ...any) { fmt.Fprintf(&b, format+"\n", args...) }
	w("#!/bin/sh")
	w("# Written by engenho's incus driver: the container's init runs the service command.")
	w(`PATH="${PATH:-/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin}"; export PATH`)
	w("D=%s", shellQuote(dir))
	w(`L="$D/%s"`, outputName)
	w("MAX=%d", maxLog)
	w(`rm -f "$D/%s"`, exitCodeName)
	w(`ip link set lo up 2>/dev/null || /bin/busybox ip link set lo up 2>/dev/null`)
	w(`rotate() { if [ -f "$L" ] && [ "$(wc -c <"$L")" -gt "$MAX" ]; then cp -f "$L" "$L.1" && : >"$L"; fi; }`)
	w("rotate")
	w(`exec >>"$L" 2>&1 </dev/null`)
	w(`(trap - TERM INT; while sleep 10; do rotate; done) &`)
	w("rotator=$!")
	if waitSecrets {
		for _, line := range waitSecretsScript(dir + "/" + exitCodeName) {
			w("%s", line)
		}
	}
	if workDir != "" {
		w("cd %s || { echo \"engenho: cannot enter working directory %s\"; echo 126 >\"$D/%s\"; exit 126; }", shellQuote(workDir), strings.ReplaceAll(workDir, `"`, ""), exitCodeName)
	}
	w("%s &", shellJoin(argv))
	w("child=$!")
	// Pass the stop on to the command's process group (the init's own:
	// no job control), not to processes incusd runs in the container
	// (exec, its file server). The init ignores its own copy.
	w(`on_stop() { trap '' TERM PWR INT; kill -TERM 0 2>/dev/null; trap on_stop TERM PWR INT; }`)
	w(`trap on_stop TERM PWR INT`)
	// wait returns early when a trapped signal arrives; keep waiting while
	// the child lives, then collect its status if the last wait did not.
	w(`wait "$child"; code=$?`)
	w(`while :; do`)
	w(`	if kill -0 "$child" 2>/dev/null; then wait "$child"; code=$?; continue; fi`)
	w(`	wait "$child" 2>/dev/null; last=$?; [ "$last" -ne 127 ] && code=$last`)
	w(`	break`)
	w(`done`)
	w(`kill "$rotator" 2>/dev/null`)
	w(`echo "$code" >"$D/%s"`, exitCodeName)
	w(`exit "$code"`)
	return b.String()
}

// shellQuote single-quotes s for POSIX sh, closing and reopening the quotes around each quote inside.
func shellQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

func shellJoin(argv []string) string {
	q := make([]string, len(argv))
	for i, a := range argv {
		q[i] = shellQuote(a)
	}
	return strings.Join(q, " ")
}
