#!/usr/bin/env bash
# hack/demo.sh: a local Gitea with a demo repository, for `make run`.
#
# Usage:
#   hack/demo.sh up     start a fresh Gitea (hack/gitea.sh, build cached), seed it, and
#                       print the path of the demo env file on stdout
#   hack/demo.sh down   stop it
#
# What `up` seeds, every run from scratch:
#   - the repository fleet/demo (organisation "fleet", default branch main) with three
#     open issues to claim;
#   - three worker accounts, worker-1..worker-3, each a read-only collaborator with a
#     read-only token (tokens/worker-N): a worker reads Gitea directly and writes only
#     through the controller's gateway;
#   - the controller's token (admin-token), the one write credential.
#
# The env file (.cache/demo/env, mode 0600) holds `export` lines: GITEA_URL,
# FLEET_REPOSITORY, FLEET_GITEA_TOKEN_FILE, the Gitea login, and the token files.
#
# Environment: DEMO_GITEA_PORT (default 3000).
set -euo pipefail

ROOT=$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")/.." && pwd)
export GITEA_PORT=${DEMO_GITEA_PORT:-3000}
DEMO=$ROOT/.cache/demo
ORG=fleet
REPO=demo
WORKERS=(worker-1 worker-2 worker-3)
WORKER_PW=Fleet-W0rker-Passw0rd

LIB_LOG_TAG=demo
# shellcheck source=hack/lib.sh
source "$ROOT/hack/lib.sh"

# api METHOD PATH [JSON]: one call to the Gitea API as the admin; fails on HTTP errors.
api() {
	local method=$1 path=$2 body=${3:-}
	curl -fsS -X "$method" -H "Authorization: token $GITEA_TOKEN" -H 'Content-Type: application/json' \
		${body:+--data "$body"} "$GITEA_URL/api/v1$path"
}

up() {
	local envfile
	envfile=$("$ROOT/hack/gitea.sh" start)
	# shellcheck disable=SC1090
	source "$envfile"
	rm -rf "$DEMO"
	mkdir -p "$DEMO/tokens"
	chmod 700 "$DEMO"

	api POST /orgs "{\"username\":\"$ORG\",\"visibility\":\"public\"}" >/dev/null
	api POST "/orgs/$ORG/repos" "{\"name\":\"$REPO\",\"auto_init\":true,\"default_branch\":\"main\",\"readme\":\"Default\"}" >/dev/null
	local title
	for title in "Add a contributing guide" "Fix the typo in the README" "Document the release process"; do
		api POST "/repos/$ORG/$REPO/issues" "{\"title\":\"$title\",\"body\":\"A demo task for the fleet.\"}" >/dev/null
	done
	local w token
	for w in "${WORKERS[@]}"; do
		api POST /admin/users "{\"username\":\"$w\",\"email\":\"$w@example.invalid\",\"password\":\"$WORKER_PW\",\"must_change_password\":false}" >/dev/null
		api PUT "/repos/$ORG/$REPO/collaborators/$w" '{"permission":"read"}' >/dev/null
		token=$(curl -fsS -X POST -u "$w:$WORKER_PW" -H 'Content-Type: application/json' \
			--data '{"name":"demo-read","scopes":["read:repository","read:issue","read:user"]}' \
			"$GITEA_URL/api/v1/users/$w/tokens" | sed -n 's/.*"sha1":"\([0-9a-f]*\)".*/\1/p')
		[[ -n $token ]] || die "no token for $w"
		printf '%s\n' "$token" >"$DEMO/tokens/$w"
	done
	printf '%s\n' "$GITEA_TOKEN" >"$DEMO/admin-token"
	umask 077
	{
		printf 'export GITEA_URL=%s\n' "$GITEA_URL"
		printf 'export FLEET_REPOSITORY=%s/%s\n' "$ORG" "$REPO"
		printf 'export FLEET_GITEA_TOKEN_FILE=%s\n' "$DEMO/admin-token"
		printf '# Gitea login (web UI, admin): %s / %s\n' "$GITEA_ADMIN" "$GITEA_ADMIN_PASSWORD"
		printf '# Worker accounts: %s (password %s), read-only tokens in %s/\n' "${WORKERS[*]}" "$WORKER_PW" "$DEMO/tokens"
	} >"$DEMO/env"
	log "up: $GITEA_URL/$ORG/$REPO with ${#WORKERS[@]} workers and 3 issues"
	printf '%s\n' "$DEMO/env"
}

case ${1:-} in
up) up ;;
down) "$ROOT/hack/gitea.sh" stop ;;
*)
	echo "usage: $0 up|down   (env: DEMO_GITEA_PORT)" >&2
	exit 2
	;;
esac
