#!/usr/bin/env bash
# Release rehearsal: installs every module of this repository as a user would
# once it is tagged, before it is. Run from anywhere (CI runs it in .ci/run):
#   bash scripts/release-rehearsal.sh
#
# 1. scripts/releaseproxy writes a file-based module proxy (the layout
#    GOPROXY=file://DIR reads) holding each releasable module of the working
#    tree at the version CHANGELOG.md names first; it fails when a go.mod
#    requires a module of this repository at another version.
# 2. For each module, in an empty module outside the repository (no replace,
#    no go.work), `go get MODULE@VERSION`, then build and run the program
#    scripts/releaseproxy/testdata/NAME/main.go, which makes one real call of
#    the module and exits 1 when its answer is wrong.
#
# The releasable modules are the root and interop/*, except
# interop/retryablehttp, which holds no code to import (a comparison test,
# like bench/). Every releasable module needs a program in testdata.
#
# Module sources during step 2: our modules come from the proxy of step 1 only;
# every other module from the local module cache, read as a second file
# proxy, so a module missing there fails the rehearsal instead of being
# downloaded. The rehearsal has a module cache of its own (a user's has no
# copy of our modules, and a copy left by an earlier run would hide a change;
# builds use -trimpath, so the build cache still serves the compiled
# dependencies from one run to the next). GONOSUMDB=github.com/retrykit turns
# the checksum database off for our modules only (GOPRIVATE would also bypass
# the proxies for them). Every other module is checked against GOSUMDB as
# usual. A file proxy cannot serve the checksum database, so the go command
# would reach it directly; where GOSUMDB names a database without a URL and
# GOPROXY's first entry is a network proxy, the database is reached through
# that proxy (its /sumdb/ endpoint), as the go command does with that proxy
# on its own. A GOSUMDB that gives its own URL, or off, is kept as it is.
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$(pwd -P)

version=$(sed -n 's/^## \(v[0-9][0-9.]*\)\( .*\)\{0,1\}$/\1/p' CHANGELOG.md | head -n 1)
if [ -z "$version" ]; then
  echo "release-rehearsal: CHANGELOG.md names no version (a heading '## vX.Y.Z ...')"; exit 1
fi

modules=(.)
for d in interop/*/; do
  d=${d%/}
  [ -f "$d/go.mod" ] || continue
  [ "$d" = interop/retryablehttp ] && continue
  modules+=("$d")
done
program() { if [ "$1" = . ]; then echo backoff; else basename "$1"; fi; }
for m in "${modules[@]}"; do
  if [ ! -f "scripts/releaseproxy/testdata/$(program "$m")/main.go" ]; then
    echo "release-rehearsal: $m has no program scripts/releaseproxy/testdata/$(program "$m")/main.go"; exit 1
  fi
done

tmp=$(mktemp -d -t backoff-release.XXXXXX)
tmp=$(cd "$tmp" && pwd -P)
case "$tmp/" in "$repo"/*)
  echo "release-rehearsal: the temporary directory $tmp is inside the repository; set TMPDIR"; exit 1
esac
cleanup() { chmod -R u+w "$tmp" 2>/dev/null || true; rm -rf "$tmp"; }
trap cleanup EXIT

cachedl=$(go env GOMODCACHE)/cache/download
sumdb=$(go env GOSUMDB)
first=$(go env GOPROXY | cut -d, -f1 | cut -d'|' -f1)
case "$sumdb $first" in
  off" "*|*" "*" "*) ;; # off, or a URL of its own
  *" http://"*|*" https://"*) sumdb="$sumdb ${first%/}/sumdb/${sumdb%%+*}" ;;
esac

echo "release-rehearsal: $version; checksum database: $sumdb (not for github.com/retrykit)"
(cd scripts/releaseproxy && go build -o "$tmp/releaseproxy" .)
"$tmp/releaseproxy" -repo . -version "$version" -out "$tmp/proxy" "${modules[@]}"

# rehearse installs module $1 as a user would and runs its program; its
# lines go to $tmp/consumer/<name>.out, and its exit status says whether it
# could.
rehearse() {
  local m=$1 name path c
  name=$(program "$m")
  path=$(awk '$1 == "module" { print $2; exit }' "$m/go.mod")
  c="$tmp/consumer/$name"
  mkdir -p "$c"
  cp "scripts/releaseproxy/testdata/$name/main.go" "$c/main.go"
  (
    echo "-- $path@$version"
    cd "$c"
    export GOWORK=off GOTOOLCHAIN=local GOFLAGS="-mod=mod -modcacherw" \
      GOMODCACHE="$tmp/modcache" GOPROXY="file://$tmp/proxy,file://$cachedl" \
      GONOSUMDB=github.com/retrykit GOPRIVATE= GONOPROXY= GOSUMDB="$sumdb"
    # The go command's own lines (what it downloaded, added, compiled) go
    # to a log, shown when the step fails.
    step() {
      if ! "$@" >"$c/go.log" 2>&1; then
        cat "$c/go.log"; echo "failed: $*"; exit 1
      fi
    }
    step go mod init example.com/rehearsal/"$name"
    step go get "$path@$version"
    echo "$(grep -c '^go: added' "$c/go.log") modules added by go get"
    step go build -trimpath -o "$c/program" .
    "$c/program"
  ) >"$tmp/consumer/$name.out" 2>&1
}

# Two modules at a time, as many as the 2-core machines this runs on have
# cores (the builds are CPU; go get mostly reads files, and the module
# cache takes concurrent writers); their lines are printed in order.
mkdir -p "$tmp/consumer"
failed=()
pids=()
for i in "${!modules[@]}"; do
  if [ "$i" -ge 2 ]; then
    j=$((i - 2))
    wait "${pids[$j]}" || failed+=("${modules[$j]}")
  fi
  rehearse "${modules[$i]}" &
  pids+=($!)
done
for ((j = ${#modules[@]} - 2; j < ${#modules[@]}; j++)); do
  [ "$j" -ge 0 ] || continue
  wait "${pids[$j]}" || failed+=("${modules[$j]}")
done
for m in "${modules[@]}"; do
  cat "$tmp/consumer/$(program "$m").out"
done
if [ "${#failed[@]}" -gt 0 ]; then
  echo "release-rehearsal: could not install and run: ${failed[*]}"; exit 1
fi
echo "release-rehearsal: ${#modules[@]} modules installed at $version and run"
