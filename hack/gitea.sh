#!/usr/bin/env bash
# hack/gitea.sh: build and run a throwaway Gitea server for integration tests.
#
# Usage:
#   hack/gitea.sh build           build (or reuse) the cached gitea binary
#   hack/gitea.sh start           build if needed, then start a fresh server
#                                 (prints the env file path on stdout)
#   hack/gitea.sh stop [--purge]  stop the server of GITEA_PORT; --purge also
#                                 deletes its run directory
#   hack/gitea.sh env             print the env file path of GITEA_PORT's server
#
# Environment:
#   GITEA_VERSION  Gitea release to build        (default v1.27.3)
#   GITEA_PORT     HTTP port                      (default 3917)
#   GITEA_HOST     address it listens on and is named by (default 127.0.0.1;
#                  hack/e2e.sh uses 10.243.0.1, the host's end of the link to the
#                  local cluster's network namespace, which pods reach)
#
# Layout (inside the project's gitignored .cache/):
#   .cache/gitea/<version>-jsonv2/gitea  the binary
#   .cache/gitea/<version>-jsonv2/mod/src/  writable copy of the source it is built from
#   .cache/gitea/run-<port>/        one server: app.ini, sqlite db, repos, logs,
#                                   gitea.pid and env, a sourceable file of
#                                   `export KEY=value` lines: GITEA_URL,
#                                   GITEA_TOKEN (admin, all scopes),
#                                   GITEA_ADMIN, GITEA_ADMIN_PASSWORD_FILE (a 0600
#                                   file holding the admin's random password)
#
# Gitea is built from source through the Go module proxy, using the default Go
# module and build caches, so a second build (or one after another project
# built the same version) only relinks. Gitea cannot be installed with `go install
# mod@version` (its go.mod carries replace directives, and from v1.27 it declares the
# path gitea.dev, which the proxy does not serve): the build copies the module source
# and compiles it as the main module. Templates and static assets are served from
# the module source (STATIC_ROOT_PATH), so no frontend build is needed.
#
# Progress lines go to stderr with the seconds elapsed since the script began
# (log/die/with_heartbeat from hack/lib.sh).
# Needs: go, gcc, git, curl.
set -euo pipefail

ROOT=$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")/.." && pwd)
VERSION=${GITEA_VERSION:-v1.27.3}
PORT=${GITEA_PORT:-3917}
CACHE=$ROOT/.cache/gitea
# Gitea's own release builds set GOEXPERIMENT=jsonv2 (its Makefile): request bodies are
# then decoded by encoding/json/v2, case-sensitive and refusing duplicate names. The
# test server is built the same way, so the gateway is tested against the decoder real
# deployments run (the folder name keeps a binary built otherwise from being reused).
BUILD_GOEXPERIMENT=jsonv2
BIN=$CACHE/$VERSION-$BUILD_GOEXPERIMENT/gitea
MODDIR=$CACHE/$VERSION-$BUILD_GOEXPERIMENT/mod
RUN=$CACHE/run-$PORT
HOST=${GITEA_HOST:-127.0.0.1}
URL=http://$HOST:$PORT
ADMIN=fleet_admin
# The admin password is random per start and written only to a 0600 file of the run
# directory (admin-password): a worker on the same machine must not know it.
ADMIN_PW=
BUILD_TAGS="sqlite sqlite_unlock_notify"
HEARTBEAT=${GITEA_HEARTBEAT_SECONDS:-60}

# Reproducible toolchain behaviour; the module and build caches stay the
# user's defaults on purpose (warm rebuilds share them).
export GOWORK=off GOTOOLCHAIN=local GOFLAGS=-buildvcs=false

LIB_LOG_TAG=gitea
# shellcheck source=hack/lib.sh
source "$ROOT/hack/lib.sh"

# secs_since prints the seconds (one decimal) since a `date +%s%N` stamp.
secs_since() {
	local ms=$((($(date +%s%N) - $1) / 1000000))
	printf '%d.%d' $((ms / 1000)) $((ms % 1000 / 100))
}

# gitea_src prints the directory of the Gitea module source in the module
# cache, downloading it through the proxy when absent. It runs outside any
# module so the project's go.mod is never consulted or touched.
gitea_src() {
	local json dir
	json=$(cd / && go mod download -json "code.gitea.io/gitea@$VERSION") ||
		die "go mod download code.gitea.io/gitea@$VERSION failed:" \
			"$(sed -n 's/^[[:space:]]*"Error": "\(.*\)",\{0,1\}$/\1/p' <<<"$json")"
	dir=$(sed -n 's/^[[:space:]]*"Dir": "\(.*\)",\{0,1\}$/\1/p' <<<"$json")
	[[ -n $dir && -f $dir/go.mod ]] || die "no module source for code.gitea.io/gitea@$VERSION: $json"
	printf '%s\n' "$dir"
}

# copy_source copies the module source into MODDIR/src, writable, so it builds as the
# main module with its own go.mod, go.sum and replace directives. From v1.27 the module
# declares its path as gitea.dev, which the proxy does not serve under that name, so it
# cannot be required from a scratch module; as the main module its path does not matter.
copy_source() {
	local src=$1
	rm -rf "$MODDIR"
	mkdir -p "$MODDIR"
	cp -r "$src/." "$MODDIR/src"
	chmod -R u+w "$MODDIR/src"
}

build() {
	if [[ -x $BIN ]]; then
		log "build: cached $BIN"
		return 0
	fi
	mkdir -p "$(dirname "$BIN")"
	# Serialise concurrent builders of the same version. The lock descriptor
	# is closed again so the server started later does not inherit it.
	exec 9>"$(dirname "$BIN")/build.lock"
	if ! flock -n 9; then
		log "build: another build of $VERSION is running; waiting for it"
		flock 9
	fi
	# Not called in a `||` context: errexit must stay in force inside.
	if [[ -x $BIN ]]; then
		log "build: $BIN was built meanwhile"
	else
		build_locked
	fi
	exec 9>&-
}

build_locked() {
	log "build: resolving code.gitea.io/gitea@$VERSION through the module proxy"
	local src
	src=$(gitea_src)
	copy_source "$src"
	log "build: source copied to $MODDIR/src ($(sed -n 's/^module //p' "$MODDIR/src/go.mod"))"
	(cd "$MODDIR/src" && go mod download) || die "go mod download for gitea $VERSION failed"
	log "build: dependencies resolved; compiling (cgo, tags: $BUILD_TAGS)"

	# with_heartbeat runs the compiler in its own process group and logs a
	# line every HEARTBEAT seconds; a signal ends the script through the EXIT
	# trap, which stops that group and drops the partial binary.
	TMP_BIN=$BIN.tmp.$$
	trap 'stop_background; rm -f "$TMP_BIN"' EXIT
	trap 'exit 129' HUP
	trap 'exit 130' INT
	trap 'exit 143' TERM
	local rc=0
	with_heartbeat "$HEARTBEAT" "go build" env -C "$MODDIR/src" CGO_ENABLED=1 GOEXPERIMENT="$BUILD_GOEXPERIMENT" go build -tags "$BUILD_TAGS" \
		-ldflags "-s -w -X 'main.Version=${VERSION#v}' -X 'main.Tags=$BUILD_TAGS'" \
		-o "$TMP_BIN" . || rc=$?
	((rc == 0)) || die "go build failed (exit $rc)"
	mv -f "$TMP_BIN" "$BIN"
	trap - EXIT HUP INT TERM
	log "build: wrote $BIN ($("$BIN" --version 2>/dev/null | head -1))"
}

pid_alive() { [[ -f $RUN/gitea.pid ]] && kill -0 "$(cat "$RUN/gitea.pid")" 2>/dev/null; }

# ours reports whether pid is the gitea server of this run directory (a stale
# pid file must never make us signal an unrelated process).
ours() {
	local pid=$1
	[[ -r /proc/$pid/cmdline ]] && tr '\0' ' ' <"/proc/$pid/cmdline" | grep -qF -- "--work-path $RUN "
}

# gone reports whether pid no longer runs: no such process, or one that has exited and
# awaits reaping (a zombie, which kill -0 still finds and whose cmdline is empty). The
# server runs in its starter's process group, so a Ctrl-C in the terminal of `make run`
# ends it before stop does; where init does not reap at once (a container's), it is a
# zombie for a while, and an exiting process's cmdline is empty even before.
gone() {
	local pid=$1 state
	kill -0 "$pid" 2>/dev/null || return 0
	[[ -d /proc/$$ ]] || return 1 # no /proc to look in: it may still run
	state=$(sed -n 's/^State:[[:space:]]*\([A-Z]\).*/\1/p' "/proc/$pid/status" 2>/dev/null) || return 0
	[[ -z $state || $state == Z || $state == X ]]
}

stop() {
	local purge=${1:-}
	if [[ -f $RUN/gitea.pid ]]; then
		local pid
		pid=$(cat "$RUN/gitea.pid")
		if ours "$pid"; then
			kill "$pid" 2>/dev/null || true
			local i
			for i in $(seq 1 100); do
				gone "$pid" && break
				sleep 0.1
			done
			if ! gone "$pid"; then
				log "stop: pid $pid ignored SIGTERM for 10s; sending SIGKILL"
				kill -9 "$pid" 2>/dev/null || true
			fi
			log "stop: gitea on port $PORT (pid $pid) stopped"
		elif gone "$pid" || { sleep 0.5 && gone "$pid"; }; then
			# Not ours to judge by its cmdline, but no longer running: it already stopped
			# (a second look lets an exiting server finish becoming a zombie).
			log "stop: gitea on port $PORT (pid $pid) had already exited"
		else
			# Alive and another program: the pid was reused. Never signal it.
			log "stop: pid $pid from $RUN/gitea.pid is not this server; not signalling it"
		fi
		rm -f "$RUN/gitea.pid"
	fi
	if [[ $purge == --purge ]]; then
		rm -rf "$RUN"
		log "stop: removed $RUN"
	fi
}

write_app_ini() {
	local ini=$1 src=$2
	cat >"$ini" <<EOF
APP_NAME = fleet-controller-it
RUN_MODE = prod
RUN_USER = $(id -un)
WORK_PATH = $RUN
I_AM_BEING_UNSAFE_RUNNING_AS_ROOT = true

[server]
PROTOCOL = http
HTTP_ADDR = $HOST
HTTP_PORT = $PORT
DOMAIN = $HOST
ROOT_URL = $URL/
STATIC_ROOT_PATH = $src
APP_DATA_PATH = $RUN/data
OFFLINE_MODE = true
DISABLE_SSH = true
START_SSH_SERVER = false
LFS_START_SERVER = false

[database]
DB_TYPE = sqlite3
PATH = $RUN/data/gitea.db
SQLITE_JOURNAL_MODE = WAL

[repository]
ROOT = $RUN/repos
DEFAULT_BRANCH = main

[security]
INSTALL_LOCK = true
SECRET_KEY = $("$BIN" generate secret SECRET_KEY)
INTERNAL_TOKEN = $("$BIN" generate secret INTERNAL_TOKEN)
; Throwaway server on loopback with throwaway passwords: a cheap hash keeps
; user creation and basic-auth calls fast on small machines.
PASSWORD_HASH_ALGO = pbkdf2\$1000\$50

[oauth2]
JWT_SECRET = $("$BIN" generate secret JWT_SECRET)

[service]
DISABLE_REGISTRATION = true
REQUIRE_SIGNIN_VIEW = false
ENABLE_NOTIFY_MAIL = false
DEFAULT_ALLOW_CREATE_ORGANIZATION = true

[mailer]
ENABLED = false

[indexer]
ISSUE_INDEXER_TYPE = db
REPO_INDEXER_ENABLED = false

[session]
PROVIDER = memory

[cache]
ADAPTER = memory

[actions]
ENABLED = false

[cron]
ENABLED = false

[cron.update_checker]
ENABLED = false

[log]
MODE = file
LEVEL = Info
ROOT_PATH = $RUN/log
EOF
}

start() {
	build >&2 # stdout carries only the env file path
	stop
	if curl -fsS -o /dev/null "$URL/" 2>/dev/null; then
		die "port $PORT already answers HTTP; pick another GITEA_PORT"
	fi
	local t_start=$(date +%s%N)
	rm -rf "$RUN"
	mkdir -p "$RUN"/{custom/conf,data,repos,log}
	local src ini=$RUN/custom/conf/app.ini
	src=$(gitea_src)
	write_app_ini "$ini" "$src"
	local g=("$BIN" --work-path "$RUN" --custom-path "$RUN/custom" --config "$ini")

	ADMIN_PW=$(od -An -tx1 -N18 /dev/urandom | tr -d ' \n')Aa1-
	(umask 077 && printf '%s\n' "$ADMIN_PW" >"$RUN/admin-password")
	"${g[@]}" migrate >"$RUN/log/migrate.out" 2>&1 ||
		{ tail -20 "$RUN/log/migrate.out" >&2; die "gitea migrate failed"; }
	"${g[@]}" admin user create --admin --username "$ADMIN" --password "$ADMIN_PW" \
		--email "$ADMIN@example.invalid" --must-change-password=false >"$RUN/log/admin.out" 2>&1 ||
		{ tail -20 "$RUN/log/admin.out" >&2; die "creating the admin user failed"; }
	# Gitea's logger may print to stdout too (asynchronously, so before or
	# after the token): keep only the line that looks like a token.
	local out token
	out=$("${g[@]}" admin user generate-access-token --username "$ADMIN" \
		--token-name "it-$(date +%s)" --scopes all --raw 2>"$RUN/log/token.err") ||
		{ cat "$RUN/log/token.err" >&2; die "generating the admin token failed"; }
	token=$(grep -E '^[0-9a-f]{40}$' <<<"$out" | tail -1 || true)
	[[ -n $token ]] || { printf '%s\n' "$out" >&2; die "no admin token in the output above"; }
	log "start: config, migrate, admin and token ready (run dir $RUN)"

	nohup "${g[@]}" web </dev/null >"$RUN/log/web.out" 2>&1 &
	echo $! >"$RUN/gitea.pid"
	local i
	for i in $(seq 1 600); do
		if curl -fsS "$URL/api/v1/version" >"$RUN/version.json" 2>/dev/null; then break; fi
		pid_alive || { tail -30 "$RUN/log/web.out" >&2; die "gitea web exited during startup"; }
		sleep 0.1
	done
	curl -fsS "$URL/api/v1/version" >"$RUN/version.json" 2>/dev/null ||
		{ stop; die "gitea did not answer $URL/api/v1/version within 60s"; }

	umask 077
	{
		printf 'export GITEA_URL=%s\n' "$URL"
		printf 'export GITEA_TOKEN=%s\n' "$token"
		printf 'export GITEA_ADMIN=%s\n' "$ADMIN"
		printf 'export GITEA_ADMIN_PASSWORD_FILE=%s\n' "$RUN/admin-password"
	} >"$RUN/env.tmp"
	mv -f "$RUN/env.tmp" "$RUN/env"
	log "start: $URL answers $(cat "$RUN/version.json") (pid $(cat "$RUN/gitea.pid"), start took $(secs_since "$t_start")s)"
	printf '%s\n' "$RUN/env"
}

env_path() {
	[[ -f $RUN/env ]] || die "no server env at $RUN/env; run '$0 start' first"
	printf '%s\n' "$RUN/env"
}

case ${1:-} in
build) build ;;
start) start ;;
stop) stop "${2:-}" ;;
env) env_path ;;
*)
	echo "usage: $0 build|start|stop [--purge]|env   (env: GITEA_VERSION, GITEA_PORT)" >&2
	exit 2
	;;
esac
