#!/usr/bin/env bash
# ctest console_browser_test: the console in a real headless chromium
# (console_test.mjs). Fails, naming the package, when Debian's chromium,
# node, npm or mosquitto is missing (scripts/setup-deps installs them).
# puppeteer-core is pinned in tools/console-test/package-lock.json and
# installed with `npm ci` into tools/console-test/node_modules when that is
# missing or from another lock file (as scripts/check-docs does); it never
# downloads a browser.
#
#   console_browser_test.sh <source dir> <build dir>
set -euo pipefail
src="$1"
build="$2"
fail() { echo "console_browser_test: $*" >&2; exit 1; }
chromium="${VEND_CHROMIUM:-/usr/bin/chromium}"  # another path: only to see this fail
[[ -x "$chromium" ]] || fail "$chromium missing: apt-get install chromium (scripts/setup-deps)"
command -v node >/dev/null || fail "node missing: apt-get install nodejs (scripts/setup-deps --docs)"
command -v npm >/dev/null || fail "npm missing: apt-get install npm (scripts/setup-deps --docs)"
command -v mosquitto >/dev/null || fail "mosquitto missing: apt-get install mosquitto"
for bin in cloud-agent/vend-agent firmware/vend-firmware simulator/vend-sim; do
  [[ -x "$build/$bin" ]] || fail "$build/$bin missing: build it first"
done

tool="$src/tools/console-test"
stamp="$tool/node_modules/.vend-lock.sha256"
want="$(sha256sum "$tool/package-lock.json" | cut -d' ' -f1)"
if [[ ! -f "$stamp" || "$(cat "$stamp")" != "$want" ]]; then
  echo "console_browser_test: installing the pinned puppeteer-core (npm ci in tools/console-test)"
  (cd "$tool" && npm ci --ignore-scripts --no-audit --no-fund --loglevel=error) ||
    fail "npm ci of the npm package puppeteer-core failed (tools/console-test)"
  echo "$want" >"$stamp"
fi
[[ -f "$tool/node_modules/puppeteer-core/package.json" ]] ||
  fail "the npm package puppeteer-core is missing in $tool/node_modules"

work="$(mktemp -d "${TMPDIR:-/tmp}/vend-console-XXXXXX")"
if VEND_CHROMIUM="$chromium" node "$src/tests/console/console_test.mjs" "$build" "$work" "$tool"; then
  rm -rf "$work"
else
  for log in "$work"/*.log; do echo "--- $log"; tail -n 30 "$log"; done >&2
  exit 1
fi
