#!/usr/bin/env bash
# hack/demo.sh: a local Gitea with a demo repository, for `make run`.
#
# Usage:
#   hack/demo.sh up     start a fresh Gitea (hack/gitea.sh, build cached), seed it, and
#                       print the path of the demo env file on stdout
#   hack/demo.sh down   stop it
#
# What `up` seeds, every run from scratch:
#   - the repository fleet/demo (organisation "fleet", default branch main) with four
#     open issues to claim, which the manager serves through its --gitea-url and
#     --repository flags;
#   - a second repository, fleet/docs, with two open issues, served through objects: the
#     GiteaServer "demo" (this same Gitea, the controller's token in a Secret) and the
#     GiteaRepository "docs" in the namespace default (docs/gitea.md);
#   - four worker accounts, worker-1..worker-4, each a write collaborator of the
#     repository with two tokens: a read-only one the worker holds (tokens/worker-N;
#     a worker reads Gitea directly and writes only through the controller's gateway),
#     and a gateway token (write:repository, write:issue, read:user) that only the
#     gateway uses to write as that worker. Each account's password is random, used
#     once to mint those tokens and then forgotten: nobody can sign in as a worker;
#   - branch protection on main as docs/gateway.md asks: only the controller's account
#     pushes, one approval required, stale approvals dismissed;
#   - the controller's token (admin-token);
#   - manifests/: the gateway credentials as Secrets labelled
#     fleet.giteatools.dev/gitea-login=<login> in the namespace fleet-system (and that
#     namespace), once for the flags' server and once more labelled
#     fleet.giteatools.dev/gitea-server=demo for the GiteaServer, and the GiteaServer's
#     token Secret; objects/: the GiteaServer and the GiteaRepository (they need the
#     project's CRDs); both for the manager's --install-manifests (docs/gateway.md).
#
# DEMO_SERVER names the GiteaServer (default demo). Any other name makes a further demo
# server, served only through its GiteaServer: its manifests hold only the Secrets
# labelled for it (gateway-<server>-worker-N, gitea-<server>-token), none for the flags'
# server, so they apply beside the first demo's (hack/e2e.sh starts a second one so).
#
# The env file (<dir>/env, mode 0600) holds `export` lines: GITEA_URL,
# FLEET_REPOSITORY, FLEET_SECOND_REPOSITORY, FLEET_GITEA_TOKEN_FILE, FLEET_DEMO_MANIFESTS,
# FLEET_DEMO_OBJECTS, the Gitea login, and
# the token files.
#
# Environment: DEMO_GITEA_PORT (default 3000), GITEA_HOST (hack/gitea.sh), DEMO_DIR (default .cache/demo),
# DEMO_CREDENTIALS_NAMESPACE (default fleet-system), DEMO_SERVER (default demo).
set -euo pipefail

ROOT=$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")/.." && pwd)
export GITEA_PORT=${DEMO_GITEA_PORT:-3000}
DEMO=${DEMO_DIR:-$ROOT/.cache/demo}
CREDS_NS=${DEMO_CREDENTIALS_NAMESPACE:-fleet-system}
ORG=fleet
REPO=demo
# The second repository, and the GiteaServer and GiteaRepository objects that serve it.
DOCS=docs
SERVER=${DEMO_SERVER:-demo}
DOCS_NS=default
# Four: a pull request needs an author, a reviewer, an approver and a merger, each a
# different identity.
WORKERS=(worker-1 worker-2 worker-3 worker-4)
# A fresh random password per run, never written down: it mints the worker tokens below,
# then nothing can use it.
WORKER_PW=$(od -An -tx1 -N16 /dev/urandom | tr -d ' \n')Aa1-

LIB_LOG_TAG=demo
# shellcheck source=hack/lib.sh
source "$ROOT/hack/lib.sh"

# api METHOD PATH [JSON]: one call to the Gitea API as the admin; fails on HTTP errors.
api() {
	local method=$1 path=$2 body=${3:-}
	curl -fsS -X "$method" -H "Authorization: token $GITEA_TOKEN" -H 'Content-Type: application/json' \
		${body:+--data "$body"} "$GITEA_URL/api/v1$path"
}

# mint LOGIN NAME SCOPES: a new token of the worker account LOGIN, on stdout.
mint() {
	local token
	token=$(curl -fsS -X POST -u "$1:$WORKER_PW" -H 'Content-Type: application/json' \
		--data "{\"name\":\"$2\",\"scopes\":[$3]}" \
		"$GITEA_URL/api/v1/users/$1/tokens" | sed -n 's/.*"sha1":"\([0-9a-f]*\)".*/\1/p')
	[[ -n $token ]] || die "no $2 token for $1"
	printf '%s\n' "$token"
}

up() {
	local envfile
	envfile=$("$ROOT/hack/gitea.sh" start)
	# shellcheck disable=SC1090
	source "$envfile"
	rm -rf "$DEMO"
	mkdir -p "$DEMO/tokens" "$DEMO/manifests" "$DEMO/objects"
	chmod 700 "$DEMO"
	umask 077
	printf 'apiVersion: v1\nkind: Namespace\nmetadata:\n  name: %s\n' "$CREDS_NS" >"$DEMO/manifests/00-namespace.yaml"

	api POST /orgs "{\"username\":\"$ORG\",\"visibility\":\"public\"}" >/dev/null
	local title repo
	local titles=("Add a contributing guide" "Fix the typo in the README" "Document the release process" "Add a changelog")
	local docs_titles=("Write the getting-started page" "Add a glossary")
	for repo in "$REPO" "$DOCS"; do
		api POST "/orgs/$ORG/repos" "{\"name\":\"$repo\",\"auto_init\":true,\"default_branch\":\"main\",\"readme\":\"Default\"}" >/dev/null
	done
	for title in "${titles[@]}"; do
		api POST "/repos/$ORG/$REPO/issues" "{\"title\":\"$title\",\"body\":\"A demo task for the fleet.\"}" >/dev/null
	done
	for title in "${docs_titles[@]}"; do
		api POST "/repos/$ORG/$DOCS/issues" "{\"title\":\"$title\",\"body\":\"A demo task in the second repository.\"}" >/dev/null
	done
	local w token
	for w in "${WORKERS[@]}"; do
		api POST /admin/users "{\"username\":\"$w\",\"email\":\"$w@example.invalid\",\"password\":\"$WORKER_PW\",\"must_change_password\":false}" >/dev/null
		for repo in "$REPO" "$DOCS"; do
			api PUT "/repos/$ORG/$repo/collaborators/$w" '{"permission":"write"}' >/dev/null
		done
		token=$(mint "$w" demo-read '"read:repository","read:issue","read:user"')
		printf '%s\n' "$token" >"$DEMO/tokens/$w"
		token=$(mint "$w" demo-gateway '"write:repository","write:issue","read:user"')
		if [[ $SERVER == demo ]]; then
			cat >"$DEMO/manifests/10-gateway-$w.yaml" <<-YAML
				apiVersion: v1
				kind: Secret
				metadata:
				  name: gateway-$w
				  namespace: $CREDS_NS
				  labels:
				    fleet.giteatools.dev/gitea-login: $w
				type: Opaque
				stringData:
				  token: $token
			YAML
		fi
		cat >"$DEMO/manifests/11-gateway-$SERVER-$w.yaml" <<-YAML
			apiVersion: v1
			kind: Secret
			metadata:
			  name: gateway-$SERVER-$w
			  namespace: $CREDS_NS
			  labels:
			    fleet.giteatools.dev/gitea-login: $w
			    fleet.giteatools.dev/gitea-server: $SERVER
			type: Opaque
			stringData:
			  token: $token
		YAML
	done
	for repo in "$REPO" "$DOCS"; do
		api POST "/repos/$ORG/$repo/branch_protections" "{\"rule_name\":\"main\",\"enable_push\":true,\"enable_push_whitelist\":true,\"push_whitelist_usernames\":[\"$GITEA_ADMIN\"],\"required_approvals\":1,\"block_on_rejected_reviews\":true,\"dismiss_stale_approvals\":true}" >/dev/null
	done
	cat >"$DEMO/manifests/20-gitea-$SERVER-token.yaml" <<-YAML
		apiVersion: v1
		kind: Secret
		metadata:
		  name: gitea-$SERVER-token
		  namespace: $CREDS_NS
		type: Opaque
		stringData:
		  token: $GITEA_TOKEN
	YAML
	# The objects need the project's CRDs, which a cluster may not have yet when the
	# Secrets above are applied: they are a folder of their own.
	cat >"$DEMO/objects/gitea-$SERVER.yaml" <<-YAML
		apiVersion: fleet.giteatools.dev/v1alpha1
		kind: GiteaServer
		metadata:
		  name: $SERVER
		spec:
		  url: $GITEA_URL
		  tokenSecretRef:
		    name: gitea-$SERVER-token
		---
		apiVersion: fleet.giteatools.dev/v1alpha1
		kind: GiteaRepository
		metadata:
		  name: $DOCS
		  namespace: $DOCS_NS
		spec:
		  server: $SERVER
		  owner: $ORG
		  name: $DOCS
	YAML
	printf '%s\n' "$GITEA_TOKEN" >"$DEMO/admin-token"
	{
		printf 'export GITEA_URL=%s\n' "$GITEA_URL"
		printf 'export FLEET_REPOSITORY=%s/%s\n' "$ORG" "$REPO"
		printf 'export FLEET_SECOND_REPOSITORY=%s/%s\n' "$ORG" "$DOCS"
		printf 'export FLEET_GITEA_TOKEN_FILE=%s\n' "$DEMO/admin-token"
		printf 'export FLEET_DEMO_MANIFESTS=%s\n' "$DEMO/manifests"
		printf 'export FLEET_DEMO_OBJECTS=%s\n' "$DEMO/objects"
		printf '# Gitea login (web UI, admin): %s, password: cat %s (0600, random per run)\n' "$GITEA_ADMIN" "$GITEA_ADMIN_PASSWORD_FILE"
		printf '# Worker accounts: %s (no password anyone keeps), read-only tokens in %s/ (gateway tokens: Secrets in %s); main is protected\n' "${WORKERS[*]}" "$DEMO/tokens" "$CREDS_NS"
	} >"$DEMO/env"
	log "up: $GITEA_URL/$ORG/$REPO with ${#titles[@]} issues and $GITEA_URL/$ORG/$DOCS with ${#docs_titles[@]}, ${#WORKERS[@]} workers"
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
