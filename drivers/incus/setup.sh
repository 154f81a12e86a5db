#!/usr/bin/env bash
# Install and start a local incusd for the incus driver and its tests (spec DRV-7).
#
# Idempotent: every step checks before it acts, so running it twice is safe.
# Needs root and access to Debian's package mirror (bookworm-backports).
#
#   bash drivers/incus/setup.sh
#
# Environment (all optional):
#   INCUS_SOCKET   unix socket incusd answers on   (/var/lib/incus/unix.socket)
#   INCUS_LOG      incusd's log file                (/var/log/incus/incusd.log)
#   INCUS_POOL     storage pool to create           (default)
#   INCUS_IMAGE    image alias to import            (busybox)
#   INCUS_HTTPS    HTTPS address for the remote-client tests, loopback only
#                  (127.0.0.1:8443; "none" leaves core.https_address alone)
set -euo pipefail

SOCKET=${INCUS_SOCKET:-/var/lib/incus/unix.socket}
LOG=${INCUS_LOG:-/var/log/incus/incusd.log}
POOL=${INCUS_POOL:-default}
IMAGE=${INCUS_IMAGE:-busybox}
HTTPS=${INCUS_HTTPS:-127.0.0.1:8443}
# Bump when the image's contents change: an alias holding an older build is
# replaced (its property engenho.image-version differs).
IMAGE_VERSION=2
BACKPORTS_LINE='deb http://deb.debian.org/debian bookworm-backports main'
BACKPORTS_FILE=/etc/apt/sources.list.d/bookworm-backports.list

step() { echo "incus-setup: $*"; }
fail() { echo "incus-setup: FAILED: $*" >&2; exit 1; }

[ "$(id -u)" = 0 ] || fail "must run as root (apt-get and incusd need it)"

# incus CLI talks to the daemon through INCUS_SOCKET's directory only when
# INCUS_DIR points there; keep the CLI and the daemon on the same socket.
export INCUS_DIR
INCUS_DIR=$(dirname "$SOCKET")

answering() { incus query /1.0 >/dev/null 2>&1; }

install_packages() {
	if grep -rqsF 'bookworm-backports' /etc/apt/sources.list /etc/apt/sources.list.d/; then
		step "apt source bookworm-backports already present"
	else
		step "adding apt source: $BACKPORTS_LINE"
		echo "$BACKPORTS_LINE" >"$BACKPORTS_FILE"
	fi
	if [ -x /usr/libexec/incus/incusd ] && command -v incus >/dev/null && [ -x /bin/busybox ] && dpkg -s busybox-static >/dev/null 2>&1; then
		step "incus-base and busybox-static already installed"
		return
	fi
	step "apt-get update"
	apt-get update -q >/dev/null || fail "apt-get update failed"
	step "installing incus-base (bookworm-backports) and busybox-static"
	DEBIAN_FRONTEND=noninteractive apt-get install -y -q -t bookworm-backports \
		incus-base busybox-static >/dev/null || fail "apt-get install incus-base busybox-static failed"
	[ -x /usr/libexec/incus/incusd ] || fail "/usr/libexec/incus/incusd missing after install"
}

start_daemon() {
	mkdir -p /var/log/incus "$(dirname "$LOG")"
	if answering; then
		step "incusd already answering on $SOCKET"
		return
	fi
	step "starting incusd (log: $LOG)"
	nohup /usr/libexec/incus/incusd --group root >>"$LOG" 2>&1 </dev/null &
	local pid=$!
	for _ in $(seq 1 120); do
		if answering; then
			step "incusd answering on $SOCKET (pid $pid)"
			return
		fi
		kill -0 "$pid" 2>/dev/null || { tail -n 20 "$LOG" >&2; fail "incusd exited during start-up; see $LOG"; }
		sleep 0.5
	done
	tail -n 20 "$LOG" >&2
	fail "incusd did not answer on $SOCKET within 60s; see $LOG"
}

init_storage() {
	if incus storage show "$POOL" >/dev/null 2>&1; then
		step "storage pool $POOL already exists"
	else
		step "creating dir storage pool $POOL"
		incus storage create "$POOL" dir >/dev/null || fail "incus storage create $POOL dir failed"
	fi
	if incus profile device show default 2>/dev/null | grep -q '^root:'; then
		step "default profile already has a root disk"
	else
		step "adding root disk on pool $POOL to the default profile"
		incus profile device add default root disk path=/ pool="$POOL" >/dev/null ||
			fail "adding the root disk to the default profile failed"
	fi
}

listen_https() {
	[ "$HTTPS" = none ] && return
	local have
	have=$(incus config get core.https_address 2>/dev/null || true)
	if [ -n "$have" ]; then
		step "incusd already listens for HTTPS on $have"
		return
	fi
	step "incusd HTTPS listener on $HTTPS (loopback, for the remote-client tests)"
	incus config set core.https_address "$HTTPS" || fail "incus config set core.https_address $HTTPS failed"
}

import_image() {
	if incus image alias list --format csv 2>/dev/null | cut -d, -f1 | grep -qx "$IMAGE"; then
		local have
		have=$(incus image get-property "$IMAGE" engenho.image-version 2>/dev/null || true)
		if [ "$have" = "$IMAGE_VERSION" ]; then
			step "image alias $IMAGE already present (version $IMAGE_VERSION)"
			return
		fi
		step "image alias $IMAGE holds build '${have:-unknown}', replacing it with version $IMAGE_VERSION"
		incus image delete "$IMAGE" || fail "incus image delete $IMAGE failed"
	fi
	step "building the $IMAGE image from /bin/busybox"
	local work
	work=$(mktemp -d)
	trap 'rm -rf "$work"' RETURN
	local root="$work/rootfs"
	mkdir -p "$root"/{bin,sbin,usr/bin,usr/sbin,etc,dev,proc,sys,tmp,root,var/log,var/www,run}
	chmod 1777 "$root/tmp"
	cp /bin/busybox "$root/bin/busybox"
	# One symlink per applet, where busybox itself would install it.
	local applet dir
	# (--list-full prints paths without the leading slash: usr/bin/[ ...)
	while read -r applet; do
		applet=/${applet#/}
		mkdir -p "$root$(dirname "$applet")"
		[ -e "$root$applet" ] || ln -s /bin/busybox "$root$applet"
	done < <("$root/bin/busybox" --list-full)
	[ -L "$root/bin/sh" ] || fail "busybox applet links missing from the image rootfs"
	ln -sf /bin/busybox "$root/sbin/init"
	printf 'root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/:/bin/false\n' >"$root/etc/passwd"
	printf 'root:x:0:\nnogroup:x:65534:\n' >"$root/etc/group"
	# busybox init without /etc/inittab respawns shells on ttys; give it a
	# quiet one that only brings loopback up (spec DRV-7) and waits.
	cat >"$root/etc/inittab" <<'INITTAB'
::sysinit:/bin/busybox ip link set lo up
::restart:/sbin/init
::shutdown:/bin/busybox true
INITTAB
	cat >"$work/metadata.yaml" <<META
architecture: $(uname -m)
creation_date: $(date +%s)
properties:
  description: busybox (Debian busybox-static) for engenho
  os: busybox
  engenho.image-version: "$IMAGE_VERSION"
  release: "$(dpkg-query -W -f='${Version}' busybox-static)"
META
	tar -C "$work" -czf "$work/meta.tar.gz" metadata.yaml
	tar -C "$root" -czf "$work/rootfs.tar.gz" .
	step "importing the $IMAGE image"
	incus image import "$work/meta.tar.gz" "$work/rootfs.tar.gz" --alias "$IMAGE" >/dev/null ||
		fail "incus image import failed"
}

install_packages
start_daemon
init_storage
listen_https
import_image
step "ready: socket $SOCKET, pool $POOL, image $IMAGE"
