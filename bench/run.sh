#!/usr/bin/env bash
# Runs every side-by-side benchmark of this module and writes BENCHMARKS.md at
# the repository root (and the raw results to bench/results.txt).
#
#   bench/run.sh                 # 6 rounds
#   ROUNDS=8 bench/run.sh
#
# The test binary is built once. Each round runs every implementation once,
# one after the other (clientgo, priorityqueue, ..., ours), and each round
# starts the rotation one implementation later, so that no implementation
# always runs first or last. On a shared, noisy machine that spreads load
# bursts over all implementations instead of one; the medians over the rounds
# are then compared. Knobs (environment):
#   ROUNDS           rounds, at least 6 (default 6)
#   MICRO_BENCHTIME  -benchtime of the hot-path benchmarks (default 1s); several
#                    values ('300ms 3s') run each benchmark at each run length
#                    in every round, and the report judges each target at
#                    every run length, shows the worst, and flags a row whose
#                    median moves more than 15% between run lengths
#   GROWTH_OPS       timed AddAfter calls per BenchmarkGrowth size (default 100000x)
#   LATENESS_OPS     1,000-item patterns per BenchmarkLateness run (default 3x)
#   ADDAFTER_OPS     AddAfter calls per BenchmarkAddAfter run (default 3000000x)
#   PREFAULTED_OPS   AddAfter calls per BenchmarkAddAfterPrefaulted run (default 3000000x)
#   EXTRA_FLAGS      more flags for the test binary (e.g. -test.short)
#   ONLY             re-measure only these hot-path benchmark functions, a
#                    regular expression over their names without "Benchmark"
#                    (e.g. 'LimiterAllow|KeyedLimiterAllow'): every
#                    implementation they compare runs in the same interleaved
#                    rounds, and the results are appended to BENCHMARKS.md as
#                    a section of their own, replacing an earlier one; the
#                    rest of the file is left as the last full run wrote it
#                    (a full run drops the section). Minutes instead of an
#                    hour, for the rows a change touches.
set -euo pipefail
cd "$(dirname "$0")"

rounds=${ROUNDS:-6}
if (( rounds < 6 )); then
  echo "run.sh: ROUNDS must be at least 6 (got $rounds)" >&2
  exit 2
fi
micro=${MICRO_BENCHTIME:-1s}
growth_ops=${GROWTH_OPS:-100000x}
lateness_ops=${LATENESS_OPS:-3x}
addafter_ops=${ADDAFTER_OPS:-3000000x}
prefaulted_ops=${PREFAULTED_OPS:-3000000x}
extra=${EXTRA_FLAGS:-}

impls=(clientgo priorityqueue xrate cenkalti apimachinery timer rearmed floor failsafe failsafeexec gobreaker aws nointerceptor grpcgo nohedge plaintimer ours)
# group name; -bench pattern for the benchmark functions, -benchtime
groups=(
  "micro;^Benchmark(QueueAddGetDone|QueueAddGetDonePriorities|QueueAddGetDoneFairness|BackoffNext|BackoffIsInBackOffSince|ItemExponentialWhen|ControllerLimiterWhenForget|BucketWhen|AddAfterSmall|LimiterAllow|LimiterWait|KeyedLimiterAllow|Retry|RetryBudget|Floor|AdaptivePermit|ThrottlerDecision|AdaptiveRateAllow|GrpcUnary|Breaker|RetryBreaker|HedgeNotFired)\$;$micro"
  "scenario;^Benchmark(WaitingHeap|Idle)\$;1x"
  "adaptive;^BenchmarkAdaptiveScenario\$;1x"
  "lateness;^BenchmarkLateness\$;$lateness_ops"
  "addafter;^BenchmarkAddAfter\$;$addafter_ops"
  "prefaulted;^BenchmarkAddAfterPrefaulted\$;$prefaulted_ops"
  "growth;^BenchmarkGrowth\$;$growth_ops"
)

only=${ONLY:-}
if [ -n "$only" ]; then
  groups=("only;^Benchmark($only)\$;$micro")
fi

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
echo "== building the test binary"
go test -c -o "$work/bench.test" .

raw=results.txt
if [ -n "$only" ]; then raw=results-only.txt; fi
: >"$raw"
load_start=$(cut -d' ' -f1-3 /proc/loadavg)
started=$(date -u +%s)
for ((r = 0; r < rounds; r++)); do
  for ((i = 0; i < ${#impls[@]}; i++)); do
    impl=${impls[$(((r + i) % ${#impls[@]}))]}
    for g in "${groups[@]}"; do
      IFS=';' read -r name pattern benchtimes <<<"$g"
      read -r -a lengths <<<"$benchtimes"
      for benchtime in "${lengths[@]}"; do
        echo "== round $((r + 1))/$rounds, $impl, $name, -benchtime $benchtime" >&2
        # With several run lengths, each result names its own (run=...).
        rename=('cat')
        if (( ${#lengths[@]} > 1 )); then
          rename=(sed -E "s#^(Benchmark[A-Za-z0-9]+)/#\1/run=$benchtime/#")
        fi
        # shellcheck disable=SC2086
        "$work/bench.test" -test.run='^$' -test.bench="$pattern/^impl=$impl\$" \
          -test.benchtime="$benchtime" -test.benchmem $extra | grep -v '^PASS$' | "${rename[@]}" >>"$raw" || true
      done
    done
  done
done
elapsed=$(( $(date -u +%s) - started ))
load_end=$(cut -d' ' -f1-3 /proc/loadavg)

if ! grep -q '^Benchmark' "$raw"; then
  echo "run.sh: no benchmark results" >&2
  exit 1
fi
if grep -q -- '--- FAIL' "$raw"; then
  echo "run.sh: a benchmark failed:" >&2
  grep -A5 -- '--- FAIL' "$raw" >&2
  exit 1
fi

echo "== benchstat"
# One table per benchmark function, ours first so that benchstat's "vs base"
# column reads "theirs compared with ours".
theirs=()
for impl in "${impls[@]}"; do
  if [ "$impl" != ours ]; then theirs+=("$impl"); fi
done
for name in $(sed -n 's/^Benchmark\([A-Za-z0-9]*\).*/\1/p' "$raw" | awk '!seen[$0]++'); do
  go tool benchstat -filter ".name:$name" -col "/impl@(ours ${theirs[*]})" "$raw" |
    grep -v '^\(goos\|goarch\|pkg\|cpu\):' >>"$work/benchstat.txt"
  echo >>"$work/benchstat.txt"
done

cpu=$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//;s/ *$//')
commit=$(git rev-parse --short HEAD 2>/dev/null || echo unknown)
if [ -n "$(git status --porcelain -- .. 2>/dev/null)" ]; then commit="$commit (with uncommitted changes)"; fi
benchtimes="hot paths ${micro}; WaitingHeap, Idle and AdaptiveScenario 1x; Lateness ${lateness_ops}; AddAfter ${addafter_ops}; AddAfterPrefaulted ${prefaulted_ops}; Growth ${growth_ops}"
report=(-benchstat "$work/benchstat.txt" -out ../BENCHMARKS.md -rounds "$rounds" -cores "$(nproc)"
  -go "$(go env GOVERSION)" -cpu "$cpu" -commit "$commit" -extra "$extra" -wall "$elapsed"
  -load-start "$load_start" -load-end "$load_end")

if [ -n "$only" ]; then
  go run ./cmd/benchreport -partial -raw "$raw" "${report[@]}" -benchtimes "$micro" \
    -command "ONLY='$only' ROUNDS=$rounds MICRO_BENCHTIME='$micro' bench/run.sh"
  echo "== appended the re-measured rows to BENCHMARKS.md (raw: bench/$raw)"
  exit 0
fi
go run ./cmd/benchreport -raw "$raw" "${report[@]}" -benchtimes "$benchtimes" \
  -command "ROUNDS=$rounds MICRO_BENCHTIME='$micro' GROWTH_OPS=$growth_ops LATENESS_OPS=$lateness_ops ADDAFTER_OPS=$addafter_ops PREFAULTED_OPS=$prefaulted_ops bench/run.sh"
echo "== wrote BENCHMARKS.md and bench/results.txt"
