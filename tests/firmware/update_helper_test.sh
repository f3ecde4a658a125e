#!/bin/sh
# The root helper of updates (firmware/packaging/vend-update) with a fake
# dpkg: install, a failed install, refusals, the watchdog's rollback past the
# deadline and after a crash loop. The "packages" are text files the fake
# dpkg-deb reads; the fake dpkg records the installed version.
set -eu
HELPER=$1
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
export VEND_UPDATE_DIR="$WORK/update" VEND_NOW_S=1000 VEND_BOOT_ID=boot-a
mkdir -p "$WORK/bin" "$VEND_UPDATE_DIR/debs" "$WORK/state"
cat >"$WORK/bin/dpkg" <<'FAKE'
#!/bin/sh
[ "$1" = -i ] || exit 2
grep -q BROKEN_INSTALL "$2" && exit 1
sed -n 's/^Version: //p' "$2" >"$FAKE_STATE/installed"
echo "$2" >>"$FAKE_STATE/calls"
FAKE
cat >"$WORK/bin/dpkg-deb" <<'FAKE'
#!/bin/sh
sed -n "s/^$3: //p" "$2"
FAKE
cat >"$WORK/bin/dpkg-query" <<'FAKE'
#!/bin/sh
cat "$FAKE_STATE/installed"
FAKE
cat >"$WORK/bin/systemctl" <<'FAKE'
#!/bin/sh
exit 0
FAKE
chmod +x "$WORK"/bin/*
export PATH="$WORK/bin:$PATH" FAKE_STATE="$WORK/state"
export VEND_DPKG=dpkg VEND_DPKG_DEB=dpkg-deb VEND_DPKG_QUERY=dpkg-query

fail() { echo "FAIL: $*" >&2; exit 1; }
marker() { sed -n "s/^$1=//p" "$VEND_UPDATE_DIR/marker"; }
installed() { cat "$WORK/state/installed"; }
package() { printf 'Package: vend-firmware\nVersion: %s\n%s\n' "$1" "${2:-}"; }
request() { # VERSION FILE
  sha=$(sha256sum <"$2" | cut -d' ' -f1)
  printf 'update_id=upd-%s\nversion=%s\nsha256=%s\nartifact=%s\nhealth_bound_s=180\n' \
    "$1" "$1" "$sha" "$2" >"$VEND_UPDATE_DIR/install.request"
}

echo 0.1.0 >"$WORK/state/installed"
package 0.1.0 >"$VEND_UPDATE_DIR/debs/0.1.0.deb"

# 1. N -> N+1: installed, the marker pending with a deadline, both packages kept.
package 0.2.0 >"$WORK/a.part"
request 0.2.0 "$WORK/a.part"
sh "$HELPER" run
[ "$(installed)" = 0.2.0 ] || fail "0.2.0 not installed"
[ "$(marker state)" = pending ] || fail "marker not pending"
[ "$(marker previous_version)" = 0.1.0 ] || fail "previous version"
[ "$(marker deadline_s)" = $((1000 + 180 + 300)) ] || fail "deadline"
[ -f "$VEND_UPDATE_DIR/debs/0.1.0.deb" ] && [ -f "$VEND_UPDATE_DIR/debs/0.2.0.deb" ] ||
  fail "packages not kept"
[ ! -e "$VEND_UPDATE_DIR/install.request" ] || fail "request left"
# Before the deadline the watchdog leaves it alone.
sh "$HELPER" check
[ "$(installed)" = 0.2.0 ] || fail "rolled back before the deadline"
# The new firmware never says good: past the deadline, rolled back.
VEND_NOW_S=1481 sh "$HELPER" check
[ "$(installed)" = 0.1.0 ] || fail "not rolled back past the deadline"
[ "$(marker state)" = rolled_back ] || fail "marker not rolled_back"
[ "$(marker version)" = 0.2.0 ] || fail "rolled-back version"
[ ! -e "$VEND_UPDATE_DIR/debs/0.2.0.deb" ] || fail "broken package kept"

# 2. A crash loop: more than 3 boots with the install pending.
printf 'state=good\n' >"$VEND_UPDATE_DIR/marker"
package 0.3.0 >"$WORK/b.part"
request 0.3.0 "$WORK/b.part"
sh "$HELPER" run
[ "$(installed)" = 0.3.0 ] || fail "0.3.0 not installed"
for boot in 1 2 3; do VEND_BOOT_ID=boot-$boot sh "$HELPER" check; done
[ "$(installed)" = 0.3.0 ] || fail "rolled back after 3 boots"
VEND_BOOT_ID=boot-4 sh "$HELPER" check
[ "$(installed)" = 0.1.0 ] || fail "crash loop not rolled back"
case "$(marker reason)" in "crash loop"*) ;; *) fail "reason: $(marker reason)" ;; esac

# 3. The daemon's own rollback request (health check failed).
printf 'state=good\n' >"$VEND_UPDATE_DIR/marker"
package 0.4.0 >"$WORK/c.part"
request 0.4.0 "$WORK/c.part"
sh "$HELPER" run
echo "reason=not healthy within 180 s: offline" >"$VEND_UPDATE_DIR/rollback.request"
sh "$HELPER" run
[ "$(installed)" = 0.1.0 ] || fail "rollback request not honoured"
[ "$(marker reason)" = "not healthy within 180 s: offline" ] || fail "rollback reason"

# 4. dpkg fails: the running version is reinstalled, the marker says failed.
printf 'state=good\n' >"$VEND_UPDATE_DIR/marker"
package 0.5.0 BROKEN_INSTALL >"$WORK/d.part"
request 0.5.0 "$WORK/d.part"
sh "$HELPER" run
[ "$(installed)" = 0.1.0 ] || fail "failed install left another version"
[ "$(marker state)" = failed ] || fail "marker not failed"

# 5. Refusals before dpkg: a changed artifact, a package of another version,
#    no package to roll back to. Nothing is installed.
calls=$(wc -l <"$WORK/state/calls")
package 0.6.0 >"$WORK/e.part"
request 0.6.0 "$WORK/e.part"
echo tampered >>"$WORK/e.part"
sh "$HELPER" run
[ "$(marker reason)" = "hash_mismatch at install" ] || fail "hash: $(marker reason)"
package 0.6.1 >"$WORK/f.part"
request 0.6.0 "$WORK/f.part"
sh "$HELPER" run
case "$(marker reason)" in "not the vend-firmware package"*) ;; *) fail "version check" ;; esac
rm "$VEND_UPDATE_DIR/debs/0.1.0.deb"
package 0.7.0 >"$WORK/g.part"
request 0.7.0 "$WORK/g.part"
sh "$HELPER" run
case "$(marker reason)" in "no package of 0.1.0"*) ;; *) fail "rollback package check" ;; esac
[ "$(wc -l <"$WORK/state/calls")" = "$calls" ] || fail "dpkg ran for a refused install"
[ "$(installed)" = 0.1.0 ] || fail "installed after a refusal"
echo "update helper: all cases passed"
