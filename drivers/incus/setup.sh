#!/usr/bin/env bash
# Install and start a local incusd for the incus driver and its tests (spec DRV-7).
#
# Idempotent: every step checks before it acts, so running it twice is safe.
# Needs root and the machine's Debian mirror. bookworm-backports is added on
# the mirror the machine's own apt sources name for bookworm (a deb822
# `URIs:` line or a sources.list `deb` line), with the same Signed-By.
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
CODENAME=bookworm
BACKPORTS=$CODENAME-backports
APT_ETC=/etc/apt

step() { echo "incus-setup: $*"; }
fail() { echo "incus-setup: FAILED: $*" >&2; exit 1; }

answering() { incus query /1.0 >/dev/null 2>&1; }

# apt_source_files ETC: the source files apt reads under ETC (/etc/apt):
# sources.list, then sources.list.d/*.list and *.sources in name order.
apt_source_files() {
	local etc=$1 f
	if [ -f "$etc/sources.list" ]; then echo "$etc/sources.list"; fi
	for f in "$etc"/sources.list.d/*; do
		case $f in
		*.list | *.sources) if [ -f "$f" ]; then echo "$f"; fi ;;
		esac
	done
}

# The one parser of apt sources, for both formats: one-line `deb [OPTS] URI
# SUITE COMPONENT...` in *.list, deb822 paragraphs (Types, URIs, Suites,
# Components, Signed-By, Enabled; field names in any case, continuation
# lines, # comments) in *.sources. It considers enabled `deb` entries with
# the `main` component and, by mode:
#   has    exits 0 when one of them is for suite `suite`;
#   entry  prints a suite-backports entry on the mirror of the entry for
#          suite `suite` (the security archive has its own suite, so it never
#          matches), in that entry's format and with its Signed-By (deb822)
#          or options (one-line) copied; exits 1 when there is none. Of
#          several, the first whose URI path ends in /debian wins, else the
#          first.
APT_SCAN_AWK='
function trim(s) { sub(/^[ \t]+/, "", s); sub(/[ \t\r]+$/, "", s); return s }
function has(list, word,   n, i, w) {
	n = split(list, w, /[ \t]+/)
	for (i = 1; i <= n; i++) if (w[i] == word) return 1
	return 0
}
function debian_path(uris,   n, i, u) {
	n = split(uris, u, /[ \t]+/)
	for (i = 1; i <= n; i++) if (u[i] ~ /\/debian\/?$/) return 1
	return 0
}
function consider(format, types, uris, suites, comps, opts, signed,   rank) {
	if (!has(types, "deb") || uris == "" || !has(comps, "main") || !has(suites, suite)) return
	found = 1
	rank = debian_path(uris) ? 2 : 1
	if (rank <= best) return
	best = rank; bformat = format; bfile = cur; buris = uris; bopts = opts; bsigned = signed
}
function flush() {
	if (para && tolower(f["enabled"]) != "no")
		consider("deb822", f["types"], f["uris"], f["suites"], f["components"], "", signed)
	para = 0; field = ""; signed = ""; split("", f)
}
FNR == 1 { flush(); cur = FILENAME; deb822 = (cur ~ /\.sources$/) }
deb822 && /^#/ { next }
deb822 && /^[ \t\r]*$/ { flush(); next }
deb822 && /^[ \t]/ {
	if (field == "signed-by") signed = signed "\n" $0
	else if (field != "") f[field] = f[field] " " trim($0)
	next
}
deb822 {
	i = index($0, ":")
	if (i == 0) { field = ""; next }
	field = tolower(trim(substr($0, 1, i - 1)))
	f[field] = trim(substr($0, i + 1))
	if (field == "signed-by") signed = $0
	para = 1
	next
}
{
	line = $0; sub(/#.*/, "", line); line = trim(line)
	n = split(line, t, /[ \t]+/)
	if (n < 3 || t[1] != "deb") next
	k = 2; opts = ""
	if (t[2] ~ /^\[/) {
		opts = t[2]
		while (opts !~ /\]$/ && k < n) { k++; opts = opts " " t[k] }
		k++
	}
	comps = ""
	for (j = k + 2; j <= n; j++) comps = comps " " t[j]
	consider("one-line", "deb", t[k], t[k + 1], comps, opts, "")
}
END {
	flush()
	if (mode == "has") exit(found ? 0 : 1)
	if (!best) exit 1
	printf "# %s-backports on the mirror of %s (added by engenho drivers/incus/setup.sh)\n", suite, bfile
	if (bformat == "deb822") {
		printf "Types: deb\nURIs: %s\nSuites: %s-backports\nComponents: main\n", buris, suite
		if (bsigned != "") print bsigned
	} else {
		printf "deb %s%s %s-backports main\n", (bopts == "" ? "" : bopts " "), buris, suite
	}
}'

# apt_scan MODE ETC SUITE: runs APT_SCAN_AWK over ETC's source files.
apt_scan() {
	local mode=$1 etc=$2 suite=$3 files
	mapfile -t files < <(apt_source_files "$etc")
	[ "${#files[@]}" -gt 0 ] || return 1
	awk -v mode="$mode" -v suite="$suite" "$APT_SCAN_AWK" "${files[@]}"
}

# apt_has_suite ETC SUITE: whether apt under ETC has an enabled deb entry
# for SUITE (main), in either format.
apt_has_suite() { apt_scan has "$1" "$2"; }

# backports_entry ETC CODENAME: the CODENAME-backports entry to add, on the
# mirror ETC's sources use for CODENAME.
backports_entry() { apt_scan entry "$1" "$2"; }

# add_backports_source ETC: adds BACKPORTS on the machine's Debian mirror
# unless an entry for it is there already.
add_backports_source() {
	local etc=$1 entry file
	if apt_has_suite "$etc" "$BACKPORTS"; then
		step "apt source $BACKPORTS already present"
		return
	fi
	entry=$(backports_entry "$etc" "$CODENAME") ||
		fail "no Debian mirror for $CODENAME (a deb entry with component main) in $etc/sources.list or $etc/sources.list.d/*.list|*.sources; add the machine's mirror there, or add a $BACKPORTS entry yourself"
	if grep -q '^Types:' <<<"$entry"; then
		file=$etc/sources.list.d/$BACKPORTS.sources
	else
		file=$etc/sources.list.d/$BACKPORTS.list
	fi
	[ ! -e "$file" ] ||
		fail "$file exists but holds no enabled $BACKPORTS entry with component main; fix or remove it, then run again"
	step "adding apt source $file:"
	sed 's/^/incus-setup:   /' <<<"$entry"
	mkdir -p "$etc/sources.list.d"
	{ printf '%s\n' "$entry" >"$file.tmp" && mv "$file.tmp" "$file"; } || fail "writing $file failed"
}

install_packages() {
	add_backports_source "$APT_ETC"
	if [ -x /usr/libexec/incus/incusd ] && command -v incus >/dev/null && [ -x /bin/busybox ] && dpkg -s busybox-static >/dev/null 2>&1; then
		step "incus-base and busybox-static already installed"
		return
	fi
	step "apt-get update"
	apt-get update -q >/dev/null || fail "apt-get update failed"
	step "installing incus-base ($BACKPORTS) and busybox-static"
	DEBIAN_FRONTEND=noninteractive apt-get install -y -q -t "$BACKPORTS" \
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
	# No RETURN trap: it would stay set after this function and fire again
	# at main's return, where $work is unbound (set -u).
	build_and_import "$work"
	rm -rf "$work"
}

# build_and_import builds the busybox image's rootfs and metadata in the
# directory $1 and imports them under the alias $IMAGE.
build_and_import() {
	local work=$1
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

main() {
	[ "$(id -u)" = 0 ] || fail "must run as root (apt-get and incusd need it)"
	# incus CLI talks to the daemon through INCUS_SOCKET's directory only when
	# INCUS_DIR points there; keep the CLI and the daemon on the same socket.
	export INCUS_DIR
	INCUS_DIR=$(dirname "$SOCKET")
	install_packages
	start_daemon
	init_storage
	listen_https
	import_image
	step "ready: socket $SOCKET, pool $POOL, image $IMAGE"
}

# Sourced (by the tests of the apt functions), it only defines them.
if [[ ${BASH_SOURCE[0]} == "$0" ]]; then
	main "$@"
fi
