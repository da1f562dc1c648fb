#!/usr/bin/env bash
# bench-compare.sh: what `make bench-compare BASE=<rev>` runs. It builds the end-to-end load tool
# (devstack/cmd/e2eload: the whole stack of `make run` in one process, a webhook receiver, Segment
# batches over HTTP) of BASE and of the work tree, runs the same load against each, alternated
# (base, head, base, head, ...), and prints each run and the ratios head/base of the medians:
# webhooks/s delivered, ack -> webhook p99, CPU s per 1,000 webhooks, peak RSS. Compare builds
# in one run on one machine: absolute figures differ between machines and days, ratios do not
# (docs/benchmarks.md#comparing-two-builds).
#
#   scripts/bench-compare.sh BASE [ROUNDS] [-- E2ELOAD FLAGS...]
#   make bench-compare BASE=main~3 ROUNDS=2 ARGS='-d 20s -rate 15000'
#
# BASE is any git revision; ROUNDS (default 2) is how many runs of each. E2ELOAD FLAGS default to
# "-d 20s -rate 15000". Nothing else may run on the machine meanwhile: it would skew one run.
#
# MAKE_RUN=1 measures as a user runs it instead: each build's `make run` binary (bin/tributary,
# its own process, the embedded broker in it) driven from the outside by the work tree's e2eload
# (-external: the same load tool and receiver for both builds, at most -c connections when
# paced), CPU and peak RSS being make run's alone:
#
#   MAKE_RUN=1 make bench-compare BASE=d03beab ARGS='-d 20s -rate 30000 -batch 100 -c 8'
#
# BASE_ENV and HEAD_ENV (space-separated NAME=value settings) are added to the environment of
# each build's stack: with BASE=HEAD they compare one build with a setting off and on, in one
# run (docs/benchmarks.md#crypto-shredding):
#
#   MAKE_RUN=1 make bench-compare BASE=HEAD BASE_ENV=SHRED_EVENTS=false HEAD_ENV=SHRED_EVENTS=true

set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD

base=${1:?usage: scripts/bench-compare.sh BASE [ROUNDS] [-- E2ELOAD FLAGS...]}
shift
rounds=2
if [ $# -gt 0 ] && [ "$1" != "--" ]; then
	rounds=$1
	shift
fi
[ "${1:-}" = "--" ] && shift
args=("$@")
[ ${#args[@]} -gt 0 ] || args=(-d 20s -rate 15000)

rev=$(git rev-parse --verify "$base^{commit}") || { echo "bench-compare: $base is not a revision" >&2; exit 2; }
work=$root/.cache/bench-compare
mkdir -p "$work"
tree=$work/base-tree
cleanup() { git worktree remove --force "$tree" >/dev/null 2>&1 || rm -rf "$tree"; }
trap cleanup EXIT
cleanup
git worktree prune
git worktree add --detach --force "$tree" "$rev" >/dev/null

echo "bench-compare: building e2eload of $base ($(git rev-parse --short "$rev")) and of the work tree ($(git describe --always --dirty))" >&2
(cd "$tree" && go build -o "$work/e2eload-base" ./devstack/cmd/e2eload)
go build -o "$work/e2eload-head" ./devstack/cmd/e2eload
if [ -n "${MAKE_RUN:-}" ]; then
	(cd "$tree" && go build -o "$work/tributary-base" ./devstack/cmd/tributary)
	go build -o "$work/tributary-head" ./devstack/cmd/tributary
fi
ingest=127.0.0.1:${BENCH_INGEST_PORT:-18080}
hooks=127.0.0.1:${BENCH_RECEIVER_PORT:-18099}

# makerun NAME ROUND: the load against that build's make run, started for this run on fresh
# data and stopped after it.
makerun() {
	local name=$1 data=$work/data-$1-$2 from=$root pid status=0
	[ "$name" = base ] && from=$tree
	local -a extra
	read -r -a extra <<<"$(settings "$name")"
	rm -rf "$data"
	printf 'sources: [{id: bench, writeKey: wk_bench}]\ndestinations:\n  - {id: bench-hooks, type: webhooks, sources: [bench], settings: {webhooks: [{url: "http://%s/hook"}], sharedSecret: bench-secret}}\n' "$hooks" >"$work/config.yaml"
	(cd "$from" && exec env CONFIG_FILE="$work/config.yaml" DATA_DIR="$data" INGEST_ADDR="$ingest" EMBEDDED_KAFKA_PORT=0 \
		WEBHOOK_ALLOW_PRIVATE=true LOG_LEVEL=warn "${extra[@]}" "$work/tributary-$name") >"$work/$name-$2.make-run.log" 2>&1 &
	pid=$!
	for _ in $(seq 600); do
		curl -sf "http://$ingest/healthz" >/dev/null 2>&1 && break
		kill -0 "$pid" 2>/dev/null || break
		sleep 0.1
	done
	sleep 2 # the services start once the config is read
	"$work/e2eload-head" -external "http://$ingest" -receiver-addr "$hooks" -pid "$pid" "${args[@]}" || status=$?
	kill -TERM "$pid" 2>/dev/null
	wait "$pid" 2>/dev/null || true
	rm -rf "$data" # the broker's copy of the run's records: about 1 GB a round
	return $status
}

# settings NAME: the extra settings of that build's stack (BASE_ENV or HEAD_ENV).
settings() {
	if [ "$1" = base ]; then echo "${BASE_ENV:-}"; else echo "${HEAD_ENV:-}"; fi
}

# run NAME ROUND: one run of that build, its output kept in .cache/bench-compare; prints its
# figures as one line: name webhooks/s p99_ms cpu_per_1000 rss_mb not_received
run() {
	local name=$1 out=$work/$1-$2.out from=$root
	# Each build runs from its own tree (it reads deploy/config relative to it); e2eload keeps
	# its broker's data in a temporary folder of its own.
	[ "$name" = base ] && from=$tree
	local -a extra
	read -r -a extra <<<"$(settings "$name")"
	if [ -n "${MAKE_RUN:-}" ]; then
		if ! makerun "$name" "$2" >"$out" 2>&1; then
			echo "bench-compare: the $name run failed (output: $out)" >&2
			tail -n 20 "$out" >&2
			return 1
		fi
	elif ! (cd "$from" && env "${extra[@]}" "$work/e2eload-$name" "${args[@]}") >"$out" 2>&1; then
		echo "bench-compare: the $name run failed (output: $out)" >&2
		tail -n 20 "$out" >&2
		return 1
	fi
	awk -v name="$name" '
		/^received [0-9]+ webhooks/ {
			match($0, /\(([0-9.]+) webhooks\/s\)/); rate = substr($0, RSTART + 1, RLENGTH - 13)
			match($0, /, [0-9]+ not received/); lost = substr($0, RSTART + 2, RLENGTH - 15) }
		/^ack -> webhook latency/ { match($0, /p99 [0-9.]+/); p99 = substr($0, RSTART + 4, RLENGTH - 4) }
		/^process CPU/ {
			match($0, /\(([0-9.]+) CPU s per/); cpu = substr($0, RSTART + 1, RLENGTH - 11)
			match($0, /peak RSS [0-9]+ [kKmMgG]B/); split(substr($0, RSTART + 9, RLENGTH - 9), v, " ")
			rss = v[1] + 0; if (v[2] ~ /^[kK]/) rss /= 1024; if (v[2] ~ /^[gG]/) rss *= 1024 }
		END { if (rate == "" || cpu == "") exit 1; printf "%s %s %s %s %.0f %s\n", name, rate, p99, cpu, rss, lost }' "$out" || {
		echo "bench-compare: no figures in the $name run's output ($out)" >&2
		return 1
	}
}

results=$work/results.txt
: >"$results"
printf '%-5s %5s %12s %12s %14s %10s %12s\n' build round webhooks/s p99_ms "CPU s/1000" "RSS MB" not_received
for ((i = 1; i <= rounds; i++)); do
	for name in base head; do
		line=$(run "$name" "$i")
		echo "$line" >>"$results"
		read -r n rate p99 cpu rss lost <<<"$line"
		printf '%-5s %5d %12s %12s %14s %10s %12s\n' "$n" "$i" "$rate" "$p99" "$cpu" "$rss" "$lost"
	done
done

# The medians of each build, and head/base.
awk '
	function median(a, n,   i, j, t) {
		for (i = 2; i <= n; i++) { t = a[i]; for (j = i - 1; j >= 1 && a[j] > t; j--) a[j + 1] = a[j]; a[j + 1] = t }
		return n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2
	}
	{ k = $1; c[k]++; r[k, c[k]] = $2 + 0; p[k, c[k]] = $3 + 0; u[k, c[k]] = $4 + 0; m[k, c[k]] = $5 + 0 }
	END {
		for (k in c) { for (i = 1; i <= c[k]; i++) { a1[i] = r[k, i]; a2[i] = p[k, i]; a3[i] = u[k, i]; a4[i] = m[k, i] }
			R[k] = median(a1, c[k]); P[k] = median(a2, c[k]); U[k] = median(a3, c[k]); M[k] = median(a4, c[k]) }
		printf "\nmedians          %12s %12s %14s %10s\n", "webhooks/s", "p99_ms", "CPU s/1000", "RSS MB"
		printf "base             %12.0f %12.1f %14.3f %10.0f\n", R["base"], P["base"], U["base"], M["base"]
		printf "head             %12.0f %12.1f %14.3f %10.0f\n", R["head"], P["head"], U["head"], M["head"]
		printf "head/base        %12.2f %12.2f %14.2f %10.2f\n", R["head"] / R["base"], P["head"] / P["base"], U["head"] / U["base"], M["head"] / M["base"]
	}' "$results"
echo "bench-compare: e2eload ${args[*]}${MAKE_RUN:+ against the make run of each build (MAKE_RUN=1)}${BASE_ENV:+, base with $BASE_ENV}${HEAD_ENV:+, head with $HEAD_ENV}, $rounds rounds each, alternated; outputs in $work" >&2
