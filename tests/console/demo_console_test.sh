#!/usr/bin/env bash
# ctest demo_console_test: "the console reachable from the demo". Runs
# scripts/demo --short on this build tree and, while its fleet sells, takes
# the console URL and the operator token from what it prints, then checks
# that the URL serves the console, that the token logs in (the call the login
# page makes, GET /v1/fleet/summary, answers 200 with the demo's machines)
# and that a wrong token is refused (401). Then the demo must end with 0.
#
#   demo_console_test.sh <source dir> <build dir>
set -euo pipefail
src="$1"
build="$2"
fail() { echo "demo_console_test: $*" >&2; exit 1; }
command -v curl >/dev/null || fail "curl missing: apt-get install curl"

out="$(mktemp "${TMPDIR:-/tmp}/vend-demo-console-XXXXXX")"
demo_pid=""
cleanup() {
  if [[ -n "$demo_pid" ]] && kill -0 "$demo_pid" 2>/dev/null; then
    kill -TERM "$demo_pid" 2>/dev/null || true
    wait "$demo_pid" 2>/dev/null || true
  fi
  rm -f "$out"
}
trap cleanup EXIT

VEND_DEMO_SKIP_SETUP=1 VEND_DEMO_BUILD_DIR="$build" \
  "$src/scripts/demo" --short --no-progress >"$out" 2>&1 &
demo_pid=$!

# "  the console:    http://127.0.0.1:PORT/console/  (log in with the operator token TOKEN, ..."
line=""
for _ in $(seq 1 300); do
  line="$(grep -m1 'the console:' "$out" || true)"
  [[ -n "$line" ]] && break
  kill -0 "$demo_pid" 2>/dev/null || { cat "$out" >&2; fail "the demo ended before printing the console URL"; }
  sleep 0.1
done
[[ -n "$line" ]] || { cat "$out" >&2; fail "the demo printed no console URL in 30 s"; }
url="$(sed -E 's|.*(http://[^ ]+/console/).*|\1|' <<<"$line")"
token="$(sed -E 's|.*operator token ([0-9A-Za-z._-]+),.*|\1|' <<<"$line")"
[[ "$url" == http://*/console/ ]] || fail "no console URL in: $line"
[[ ${#token} -ge 16 && "$token" != "$line" ]] || fail "no operator token in: $line"
base="${url%/console/}"
echo "demo_console_test: the demo printed $url and a ${#token}-character token"

page="$(curl -fsS "$url")" || fail "GET $url failed"
grep -q '<title>Vend console</title>' <<<"$page" || fail "$url is not the console"
grep -q 'id="login-form"' <<<"$page" || fail "$url has no login form"
summary="$(curl -fsS -H "Authorization: Bearer $token" "$base/v1/fleet/summary")" ||
  fail "the printed token does not log in (GET /v1/fleet/summary)"
grep -Eq '"devices":[1-9]' <<<"$summary" || fail "the demo's fleet is empty: $summary"
code="$(curl -s -o /dev/null -w '%{http_code}' -H 'Authorization: Bearer not-the-token' \
  "$base/v1/fleet/summary")"
[[ "$code" == 401 ]] || fail "a wrong token got $code, not 401"
echo "demo_console_test: the console is served and the token logs in ($summary)"

set +e
wait "$demo_pid"
rc=$?
set -e
demo_pid=""
[[ $rc -eq 0 ]] || { tail -n 40 "$out" >&2; fail "scripts/demo --short exited $rc"; }
echo "demo_console_test: ok"
