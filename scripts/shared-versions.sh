#!/usr/bin/env bash
# Shared versions: fails when two of this repository's Go modules build the
# same dependency at different versions. Run from anywhere (CI runs it in
# .ci/run, once `go mod tidy -diff` has downloaded every module):
#   bash scripts/shared-versions.sh
#
# Why it matters: a compiled package is reused from the build cache (and
# staticcheck's analysis from its cache) only where its source and every
# dependency under it are the same. bench/, interop/clientgo and
# interop/controllerruntime all build Kubernetes' client libraries, some 700
# packages; with one golang.org/x/sys or go-logr/logr version apart, every one
# of them is compiled and analysed again for each module, several minutes of
# CPU on a machine with empty caches.
#
# What is compared: the modules of the packages each module builds, its tests
# included (`go list -deps -test`), not its whole module graph. Two
# exceptions, each for a reason that outweighs a second compile:
#   - k8s.io/utils: the library's go.mod pins the newest version that still
#     claims Go 1.22 (the library's floor), while client-go needs a newer one;
#   - interop/asynq: its go.mod claims Go 1.24, which the go-redis and x/...
#     versions the other modules share do not allow.
set -euo pipefail
cd "$(dirname "$0")/.."

excluded_modules=' ./interop/asynq '
excluded_dependencies=' k8s.io/utils '

mapfile -t modules < <(find . -name go.mod -not -path './.git/*' -printf '%h\n' | sort)
built=()
for m in "${modules[@]}"; do
  [[ $excluded_modules == *" $m "* ]] && continue
  built+=("$m")
done
rc=0
report=$(
  for m in "${built[@]}"; do
    (cd "$m" && go list -deps -test -f '{{with .Module}}{{.Path}} {{.Version}}{{end}}' ./...) |
      awk -v m="$m" 'NF == 2 { print $1, $2, m }' | sort -u
  done | awk -v skip="$excluded_dependencies" '
    index(skip, " " $1 " ") { next }
    { key = $1 " " $2; if (!(key in users)) versions[$1]++; users[key] = users[key] " " $3 }
    END {
      bad = 0
      for (key in users) {
        split(key, kv, " ")
        if (versions[kv[1]] > 1) { print "  " key " in" users[key]; bad = 1 }
      }
      exit bad
    }' | sort
) || rc=$?
if [ "$rc" -ne 0 ]; then
  echo "these dependencies are built at more than one version across the modules:"
  echo "$report"
  echo "align them (go get DEP@VERSION in each module, then go mod tidy): see scripts/shared-versions.sh"
  exit 1
fi
echo "every dependency built by two or more of the ${#built[@]} modules checked is at one version"
