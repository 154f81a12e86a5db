// Package sdnotify speaks systemd's notify protocol without a dependency
// (spec DMN-18): datagrams of newline-separated assignments sent to the
// unix socket named by $NOTIFY_SOCKET (a path, or an abstract name starting
// with @). READY=1 when the runtime is running, STOPPING=1 when it drains to
// exit, STATUS=... for humans, WATCHDOG=1 pings when systemd set
// WATCHDOG_USEC for this process. Without NOTIFY_SOCKET every call is a
// no-op, so the daemon runs the same outside systemd.
//
// Layer: runtime. It imports nothing from the module.
package sdnotify
