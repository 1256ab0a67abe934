#!/usr/bin/env bash
# Mutation testing of the library with gremlins: plants one small bug at a
# time (a < made <=, a condition negated, a + made -, ...) in the code of a
# package, runs that package's tests against it, and counts the bugs the tests
# catch (killed) and miss (lived). Not part of CI: a full run takes hours on
# a two-core machine. See CONTRIBUTING.md.
#
# Usage:
#   scripts/mutation.sh                  every package of the library: the
#                                        root package, each one under
#                                        internal/, httpretry, and the
#                                        packages of the interop modules
#                                        (from `go list ./...` in each module,
#                                        so new packages are included)
#   scripts/mutation.sh PKG...           only these import paths, of the root
#                                        module or of a module below it (such
#                                        as .../interop/redis)
#
# Environment:
#   WORKERS               gremlins workers (default 1: the tests of this
#                         library are timing-sensitive to CPU starvation)
#   TIMEOUT_COEFFICIENT   a mutant's test run may take this many times the
#                         unmutated run (default 10)
#   GREMLINS_FLAGS        extra gremlins flags, e.g. "-E ^queue_" to skip
#                         files, or "--diff origin/main" for changed code only
#   MUTATION_OUT          where the logs and JSON reports go (default: a new
#                         temporary directory, printed at the end)
#
# It prints, per package, the test efficacy, killed ÷ (killed + lived), the
# same without the accepted survivors (net-eff: the figure the 95% target
# is about), and the mutant coverage, (killed + lived) ÷ (killed + lived +
# not covered);
# then every mutant that lived and is not listed, with its reason, in
# testdata/mutation-survivors.txt. It exits 1 if there is such a mutant.
set -euo pipefail
cd "$(dirname "$0")/.."

GREMLINS=github.com/go-gremlins/gremlins/cmd/gremlins@v0.6.0
SURVIVORS=testdata/mutation-survivors.txt
out=${MUTATION_OUT:-$(mktemp -d -t mutation.XXXXXX)}
mkdir -p "$out"
module=$(go list -m)

# The modules of the tree, as "import path<TAB>directory": the root module
# and those below it with a go.mod of their own (interop/*, bench).
mapfile -t modules < <(find . -name go.mod -not -path './.git/*' -printf '%h\n' | sort |
  while IFS= read -r d; do printf '%s\t%s\n' "$(cd "$d" && go list -m)" "$d"; done)

# moduledir PKG prints the directory of the module that holds PKG: the one
# whose path is the longest prefix of PKG.
moduledir() {
  local best="" bestdir="" m path dir
  for m in "${modules[@]}"; do
    path=${m%%$'\t'*}
    dir=${m#*$'\t'}
    if [[ $1 == "$path" || $1 == "$path"/* ]] && [ ${#path} -gt ${#best} ]; then
      best=$path
      bestdir=$dir
    fi
  done
  [ -n "$bestdir" ] || { echo "no module of this tree holds $1" >&2; return 1; }
  echo "$bestdir"
}

if [ $# -gt 0 ]; then
  pkgs=("$@")
else
  mapfile -t pkgs < <(go list ./... | grep -E "^${module}(/internal(/.*)?|/httpretry)?\$")
  for d in interop/*/; do
    mapfile -t -O "${#pkgs[@]}" pkgs < <(cd "$d" && go list ./...)
  done
fi

rows=()
unaccepted=0
for pkg in "${pkgs[@]}"; do
  dir=$(cd "$(moduledir "$pkg")" && go list -f '{{.Dir}}' "$pkg")
  rel=${pkg#"$module"}
  rel=${rel#/}
  name=${rel:-root}
  name=${name//\//_}
  # Gremlins mutates every Go file under the directory it is given: the
  # subdirectories hold other packages (or modules), so they are left out.
  excludes=()
  while IFS= read -r d; do
    excludes+=(-E "^${d#"$dir"/}/")
  done < <(find "$dir" -mindepth 1 -maxdepth 1 -type d -not -name '.*' -printf '%p\n' | sort)
  echo "== gremlins: $pkg (log: $out/$name.log)"
  # shellcheck disable=SC2086 # GREMLINS_FLAGS is a list of flags
  (cd "$dir" && go run "$GREMLINS" unleash \
    --workers "${WORKERS:-1}" \
    --timeout-coefficient "${TIMEOUT_COEFFICIENT:-10}" \
    --output "$out/$name.json" \
    "${excludes[@]}" ${GREMLINS_FLAGS:-} "$dir") >"$out/$name.log" 2>&1 ||
    echo "   gremlins exited with $? (see the log)"
  count() { grep -oE "$1: [0-9]+" "$out/$name.log" | tail -1 | grep -oE '[0-9]+$' || echo 0; }
  killed=$(count Killed)
  lived=$(count Lived)
  uncovered=$(count 'Not covered')
  timedout=$(count 'Timed out')
  # Lived mutants, keyed as "path:column TYPE | source line" (trimmed), so that a
  # key survives edits elsewhere in the file; checked against the accepted
  # survivors, whose lines are "key | why".
  accepted=0
  while read -r typ file line col; do
    src=$(sed -n "${line}p" "$dir/$file" | sed -E 's/^[[:space:]]+//; s/[[:space:]]+$//')
    key="${rel:+$rel/}$file:$col $typ | $src"
    if ! grep -qF -- "$key |" "$SURVIVORS" 2>/dev/null; then
      echo "   lived, not in $SURVIVORS ($file:$line:$col): $key"
      unaccepted=$((unaccepted + 1))
    else
      accepted=$((accepted + 1))
    fi
  done < <(sed -nE 's/^ *LIVED ([A-Z_]+) at ([^:]+):([0-9]+):([0-9]+).*/\1 \2 \3 \4/p' "$out/$name.log")
  efficacy=n/a
  coverage=n/a
  if [ $((killed + lived)) -gt 0 ]; then
    efficacy=$(awk -v k="$killed" -v l="$lived" 'BEGIN { printf "%.1f%%", 100 * k / (k + l) }')
  fi
  # The efficacy that the 95% target is about: accepted survivors are
  # mutants that no test can or should kill (equivalent, or speed only).
  net=n/a
  if [ $((killed + lived - accepted)) -gt 0 ]; then
    net=$(awk -v k="$killed" -v l="$lived" -v a="$accepted" 'BEGIN { printf "%.1f%%", 100 * k / (k + l - a) }')
  fi
  if [ $((killed + lived + uncovered)) -gt 0 ]; then
    coverage=$(awk -v k="$killed" -v l="$lived" -v u="$uncovered" 'BEGIN { printf "%.1f%%", 100 * (k + l) / (k + l + u) }')
  fi
  rows+=("$(printf '%-32s %8s %8s %8s %6s %6s %8s %9s %9s' "${rel:-.}" "$efficacy" "$net" "$coverage" "$killed" "$lived" "$accepted" "$uncovered" "$timedout")")
done

echo
printf '%-32s %8s %8s %8s %6s %6s %8s %9s %9s\n' package efficacy net-eff coverage killed lived accepted uncovered timed-out
printf '%s\n' "${rows[@]}"
echo
echo "logs and JSON reports: $out"
if [ "$unaccepted" -gt 0 ]; then
  echo "$unaccepted mutant(s) lived that $SURVIVORS does not accept: kill each with a test, or list it there with why"
  exit 1
fi
