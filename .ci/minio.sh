#!/usr/bin/env bash
# MinIO for the object-store tests (drivers/objstore, spec DRV-10).
#
#   bash .ci/minio.sh start   install MinIO if absent, start it on loopback,
#                             create the bucket, wait until ready; print
#                             `export ENGENHO_S3_...` lines on stdout and
#                             write them to .ci/cache/minio.env
#   bash .ci/minio.sh stop    stop the MinIO this script started
#   bash .ci/minio.sh restart stop the MinIO this script started and start it
#                             again on the same port, credentials and data
#                             (not wiped), wait until ready; prints nothing on
#                             stdout (the env stays valid) and the time it
#                             took on stderr. Starts it again if it died.
#   bash .ci/minio.sh env     print the env of the running MinIO
#
# Usage from .ci/run:   eval "$(bash .ci/minio.sh start)"
# Everything else (progress, errors) goes to stderr.
#
# MinIO's own defaults listen on every interface (:9000, console on a random
# port); here both are bound to 127.0.0.1, the console is off, the update
# check and call-home are off, credentials are random per start, and the data
# directory is wiped at each start. MinIO is built from the Go module proxy
# (about 5 minutes the first time, then reused from GOPATH/bin); its code and
# binary are never committed.
#
# Knobs: ENGENHO_MINIO_PORT (default 9900; the console gets PORT+1),
# ENGENHO_MINIO_DIR (default /var/tmp/engenho-minio-$UID),
# ENGENHO_MINIO_VERSION (module version to build).
set -euo pipefail

cd "$(dirname "$0")/.."
CACHE=.ci/cache
ENV_FILE=$CACHE/minio.env
PID_FILE=$CACHE/minio.pid
DIR_FILE=$CACHE/minio.dir # the data directory's parent of the last start
VERSION=${ENGENHO_MINIO_VERSION:-v0.0.0-20260212201848-7aac2a2c5b7c}
PORT=${ENGENHO_MINIO_PORT:-9900}
BASE=${ENGENHO_MINIO_DIR:-/var/tmp/engenho-minio-$(id -u)}
BUCKET=engenho-test
REGION=us-east-1

log() { echo "minio.sh: $*" >&2; }

find_minio() {
	if command -v minio >/dev/null 2>&1; then
		command -v minio
		return
	fi
	local bin dir
	dir=$(go env GOBIN)
	[ -n "$dir" ] || dir="$(go env GOPATH | cut -d: -f1)/bin"
	bin="$dir/minio"
	if [ -x "$bin" ]; then
		echo "$bin"
	fi
}

install_minio() {
	log "building github.com/minio/minio@$VERSION from the Go module proxy (minutes the first time)"
	(cd /tmp && GOFLAGS=-buildvcs=false GOTOOLCHAIN=local go install "github.com/minio/minio@$VERSION") >&2
}

running_pid() {
	[ -f "$PID_FILE" ] || return 1
	local pid
	pid=$(cat "$PID_FILE")
	if kill -0 "$pid" 2>/dev/null && grep -q minio "/proc/$pid/cmdline" 2>/dev/null; then
		echo "$pid"
		return 0
	fi
	return 1
}

port_busy() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

random_hex() { od -An -N"$1" -tx1 /dev/urandom | tr -d ' \n'; }

# s3_curl METHOD PATH: a SigV4-signed request to the running MinIO; the
# credentials go to curl on stdin, never on its command line.
s3_curl() {
	# shellcheck disable=SC1090
	. "$ENV_FILE"
	printf 'user = "%s:%s"\n' "$ENGENHO_S3_ACCESS_KEY" "$ENGENHO_S3_SECRET_KEY" |
		curl -s -o /dev/null -w '%{http_code}' -K - --aws-sigv4 "aws:amz:$REGION:s3" \
			-X "$1" "$ENGENHO_S3_ENDPOINT$2"
}

wait_ready() {
	local url=$1 i
	for i in $(seq 1 300); do
		if curl -sf -o /dev/null "$url/minio/health/ready"; then
			return 0
		fi
		if ! running_pid >/dev/null; then
			log "MinIO exited during start; its log:"
			tail -n 30 "$BASE/minio.log" >&2 || true
			return 1
		fi
		sleep 0.2
	done
	log "MinIO not ready after 60s; its log:"
	tail -n 30 "$BASE/minio.log" >&2 || true
	return 1
}

start() {
	mkdir -p "$CACHE"
	if running_pid >/dev/null && [ -f "$ENV_FILE" ]; then
		log "already running (pid $(running_pid))"
		cat "$ENV_FILE"
		return
	fi
	local bin
	bin=$(find_minio)
	if [ -z "$bin" ]; then
		install_minio
		bin=$(find_minio)
		[ -n "$bin" ] || { log "minio not found after go install"; exit 1; }
	fi
	local tries=0
	while port_busy "$PORT" || port_busy $((PORT + 1)); do
		tries=$((tries + 1))
		[ $tries -lt 20 ] || { log "no free port near ${ENGENHO_MINIO_PORT:-9900}"; exit 1; }
		PORT=$((PORT + 2))
	done
	# Another MinIO (another clone's) holds the default port and may keep
	# its data under the default directory: this one gets its own.
	[ "$PORT" = "${ENGENHO_MINIO_PORT:-9900}" ] || BASE="$BASE-$PORT"
	rm -rf "$BASE/data"
	mkdir -p "$BASE/data"
	chmod 700 "$BASE"
	local user secret endpoint
	user="engenho$(random_hex 6)"
	secret=$(random_hex 20)
	endpoint="http://127.0.0.1:$PORT"
	(umask 077 && cat >"$ENV_FILE" <<-ENV
		export ENGENHO_S3_ENDPOINT=$endpoint
		export ENGENHO_S3_BUCKET=$BUCKET
		export ENGENHO_S3_ACCESS_KEY=$user
		export ENGENHO_S3_SECRET_KEY=$secret
		export ENGENHO_S3_REGION=$REGION
	ENV
	)
	echo "$BASE" >"$DIR_FILE"
	log "starting $bin on $endpoint, data in $BASE/data"
	: >"$BASE/minio.log"
	launch "$bin" "$PORT" "$user" "$secret"
	local code
	code=$(s3_curl PUT "/$BUCKET")
	case $code in
	200 | 409) ;;
	*) log "creating bucket $BUCKET: HTTP $code"; exit 1 ;;
	esac
	code=$(s3_curl HEAD "/$BUCKET")
	[ "$code" = 200 ] || { log "bucket $BUCKET not reachable: HTTP $code"; exit 1; }
	log "ready; bucket $BUCKET; env in $ENV_FILE"
	cat "$ENV_FILE"
}

# launch BIN PORT USER SECRET: MinIO in the background on loopback PORT
# (console PORT+1) with the data in $BASE/data and its log appended to
# $BASE/minio.log; records its pid and waits until it is ready.
launch() {
	local bin=$1 port=$2 user=$3 secret=$4
	MINIO_ROOT_USER=$user MINIO_ROOT_PASSWORD=$secret \
		MINIO_BROWSER=off MINIO_UPDATE=off MINIO_CALLHOME_ENABLE=off MINIO_CI_CD=1 \
		nohup "$bin" server --quiet --anonymous \
		--address "127.0.0.1:$port" --console-address "127.0.0.1:$((port + 1))" \
		"$BASE/data" >>"$BASE/minio.log" 2>&1 </dev/null &
	echo $! >"$PID_FILE"
	wait_ready "http://127.0.0.1:$port"
}

# kill_running: SIGTERM to the MinIO this script started, SIGKILL after 5s.
kill_running() {
	local pid
	if pid=$(running_pid); then
		kill "$pid"
		for _ in $(seq 1 50); do
			kill -0 "$pid" 2>/dev/null || break
			sleep 0.1
		done
		kill -0 "$pid" 2>/dev/null && kill -9 "$pid"
		log "stopped pid $pid"
	fi
}

stop() {
	kill_running
	rm -f "$PID_FILE" "$ENV_FILE" "$DIR_FILE"
}

# restart: the same MinIO again, for the chaos campaign's restart fault.
# Everything it needs comes from the files start wrote, so a restart with
# other ENGENHO_MINIO_* values in the environment still finds its data.
restart() {
	[ -f "$ENV_FILE" ] || { log "no MinIO started by this script here (no $ENV_FILE): use start"; exit 1; }
	# shellcheck disable=SC1090
	. "$ENV_FILE"
	[ -f "$DIR_FILE" ] && BASE=$(cat "$DIR_FILE")
	[ -d "$BASE/data" ] || { log "data directory $BASE/data is gone: use start"; exit 1; }
	local port=${ENGENHO_S3_ENDPOINT##*:} bin began ms
	bin=$(find_minio)
	[ -n "$bin" ] || { log "minio binary not found: use start"; exit 1; }
	began=$(date +%s%N)
	kill_running
	for _ in $(seq 1 100); do
		port_busy "$port" || break
		sleep 0.1
	done
	port_busy "$port" && { log "port $port still busy 10s after MinIO stopped"; exit 1; }
	launch "$bin" "$port" "$ENGENHO_S3_ACCESS_KEY" "$ENGENHO_S3_SECRET_KEY"
	local code
	code=$(s3_curl HEAD "/$BUCKET")
	[ "$code" = 200 ] || { log "bucket $BUCKET not there after the restart: HTTP $code"; exit 1; }
	ms=$((($(date +%s%N) - began) / 1000000))
	log "restarted on $ENGENHO_S3_ENDPOINT in ${ms}ms (pid $(running_pid)), data kept"
}

case "${1:-}" in
start) start ;;
stop) stop ;;
restart) restart ;;
env)
	running_pid >/dev/null || { log "not running"; exit 1; }
	cat "$ENV_FILE"
	;;
*)
	echo "usage: $0 start|stop|restart|env" >&2
	exit 2
	;;
esac
