#!/usr/bin/env bash
# test.sh: what `make test` runs. Every module's unit, integration and end-to-end tests under
# -race, against the embedded broker (kfake) and, when Java 17+ and Maven are present, against
# Apache Kafka started by deploy/kafka/kafka.sh. TEST_APACHE_KAFKA=1 makes a missing Apache
# Kafka a failure instead of a loud skip. Extra arguments go to `go test` (e.g. -run, -short).
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
mkdir -p .cache
log=.cache/test.log

banner() { printf '\n==== %s ====\n' "$*" >&2; }

started_kafka=false
cleanup() {
	if $started_kafka; then
		banner "stopping Apache Kafka"
		deploy/kafka/kafka.sh down >&2 || true
	fi
}
trap cleanup EXIT

if [ -z "${APACHE_KAFKA_BROKERS:-}" ] && running=$(deploy/kafka/kafka.sh brokers 2>/dev/null); then
	# A broker started by `make kafka-up` is used, and left running.
	export APACHE_KAFKA_BROKERS=$running
	banner "using the running Apache Kafka at $APACHE_KAFKA_BROKERS"
elif [ -z "${APACHE_KAFKA_BROKERS:-}" ]; then
	if deploy/kafka/kafka.sh check >&2; then
		banner "starting Apache Kafka for the conformance suites"
		if APACHE_KAFKA_BROKERS=$(deploy/kafka/kafka.sh up); then
			started_kafka=true
			export APACHE_KAFKA_BROKERS
			banner "Apache Kafka is up at $APACHE_KAFKA_BROKERS"
		elif [ "${TEST_APACHE_KAFKA:-}" = 1 ]; then
			banner "Apache Kafka did not start and TEST_APACHE_KAFKA=1: failing"
			exit 1
		else
			banner "SKIPPING the Apache Kafka suites: Apache Kafka did not start (see above)"
		fi
	elif [ "${TEST_APACHE_KAFKA:-}" = 1 ]; then
		banner "Java 17+ or Maven is missing and TEST_APACHE_KAFKA=1: failing"
		exit 1
	else
		banner "SKIPPING the Apache Kafka suites: Java 17+ or Maven is missing (install them, or set APACHE_KAFKA_BROKERS)"
	fi
fi

mapfile -t patterns < <(go list -m -f '{{.Path}}/...')
banner "go test -race over ${#patterns[@]} modules"
set +e
go test -race -count=1 -timeout 20m -v "$@" "${patterns[@]}" >"$log" 2>&1
rc=$?
# Timing tests (throughput ratios in real time) skip themselves under -race, whose 5-10x
# slowdown they would measure instead of the code; they run here without it.
TIMING_TESTS='^(TestIsolationDeadEndpointDoesNotSlowHealthyOne|TestOrderedDestinationAUsersFailingHeadDelaysNoOtherUser)$'
banner "timing tests without -race"
go test -count=1 -timeout 10m -v -run "$TIMING_TESTS" "$@" github.com/tributary-cdp/tributary/deliverer >>"$log" 2>&1
trc=$?
if [ $rc -eq 0 ]; then rc=$trc; fi
set -e

# Package results, which broker each conformance suite ran against, and skips.
grep -E '^(ok|FAIL)\s|^\s*--- (FAIL|SKIP)|^panic:|SKIPPING|conformance: ' "$log" || true
if [ $rc -ne 0 ]; then
	banner "failures (full log: $root/$log)"
	grep -nE -B2 -A25 -- '--- FAIL|^panic:|^FAIL\s|build failed|\[setup failed\]' "$log" | head -400 || true
fi
passed=$(grep -cE '^\s*--- PASS' "$log" || true)
failed=$(grep -cE '^\s*--- FAIL' "$log" || true)
skipped=$(grep -cE '^\s*--- SKIP' "$log" || true)
if [ $rc -ne 0 ] && [ "$failed" = 0 ]; then failed=1; fi
echo
echo "tests: $passed passed, $failed failed, $skipped skipped"
exit $rc
