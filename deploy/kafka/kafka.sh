#!/usr/bin/env bash
# kafka.sh: a single-node Apache Kafka (KRaft, combined broker and controller) for Tributary's
# tests, on loopback, without Docker. Kafka comes from Maven Central through deploy/kafka/pom.xml
# (the one place its version is pinned) and runs on the installed Java 17+.
#
#   kafka.sh fetch    download Kafka's jars into the cache folder (idempotent, fast when cached)
#   kafka.sh up       start the broker unless one runs; print ONLY its bootstrap address on stdout
#   kafka.sh start    start it again on the state `up` made (same ports and data), after a kill
#   kafka.sh down     stop it (SIGTERM, SIGKILL after 20s) and remove its state folder
#   kafka.sh brokers  print the running broker's bootstrap address, or exit 1
#   kafka.sh status   say whether one runs, where, and what is cached
#   kafka.sh check    exit 0 when this machine can run it (Java 17+, and Maven or a full cache)
#   kafka.sh smoke    create a topic, produce, consume and delete it on the running broker
#   kafka.sh logs     print the tail of the running broker's log
#
# Environment: TRIBUTARY_CACHE_DIR (default <repo>/.cache; Kafka goes to <it>/kafka/<version>/),
# KAFKA_STATE_DIR (default <cache>/kafka/run), KAFKA_START_TIMEOUT (seconds, default 90),
# KAFKA_HEAP_OPTS (default -Xms256m -Xmx512m), JAVA_HOME, MVN (default mvn).
# Every message but the bootstrap address goes to stderr.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/../.." && pwd)
pom=$here/pom.xml
probe_src=$here/KafkaProbe.java
log4j_conf=$here/log4j2.properties

version=$(sed -n 's:.*<kafka\.version>\([^<]*\)</kafka\.version>.*:\1:p' "$pom" | head -n1)
if [ -z "$version" ]; then
	echo "kafka.sh: no <kafka.version> in $pom" >&2
	exit 1
fi

cache_root=${TRIBUTARY_CACHE_DIR:-$root/.cache}
case $cache_root in /*) ;; *) cache_root=$PWD/$cache_root ;; esac
cache=$cache_root/kafka
home=$cache/$version
libs=$home/libs
classes=$home/classes
stamp=$home/.complete
state=${KAFKA_STATE_DIR:-$cache/run}
case $state in /*) ;; *) state=$PWD/$state ;; esac
start_timeout=${KAFKA_START_TIMEOUT:-90}
stop_timeout=20
mvn_cmd=${MVN:-mvn}

say() { printf 'kafka.sh: %s\n' "$*" >&2; }
die() {
	say "$*"
	exit 1
}

# java_bin / javac_bin: $JAVA_HOME's when it has one, else the PATH's.
java_bin() {
	if [ -n "${JAVA_HOME:-}" ] && [ -x "$JAVA_HOME/bin/java" ]; then echo "$JAVA_HOME/bin/java"; else command -v java || true; fi
}
javac_bin() {
	if [ -n "${JAVA_HOME:-}" ] && [ -x "$JAVA_HOME/bin/javac" ]; then echo "$JAVA_HOME/bin/javac"; else command -v javac || true; fi
}

# java_major prints the major version of the java at $1 (8 for 1.8).
java_major() {
	local v
	v=$("$1" -XshowSettings:properties -version 2>&1 | sed -n 's/^ *java\.specification\.version = //p' | head -n1)
	case $v in 1.*) v=${v#1.} ;; esac
	echo "${v%%.*}"
}

# require_java fails with an explanation unless Java 17 or newer is installed.
require_java() {
	local java major
	java=$(java_bin)
	if [ -z "$java" ]; then
		die "Java 17 or newer is required and no 'java' was found (JAVA_HOME or PATH). On Debian: apt-get install -y openjdk-17-jdk-headless"
	fi
	major=$(java_major "$java")
	if ! [ "$major" -ge 17 ] 2>/dev/null; then
		die "Java 17 or newer is required; $java is Java ${major:-of unknown version}. On Debian: apt-get install -y openjdk-17-jdk-headless"
	fi
}

# want_stamp identifies what the cache must hold: the version, the pom and the probe's source.
want_stamp() {
	cat "$pom" "$probe_src" | sha256sum | cut -d' ' -f1
}

cached() {
	[ -f "$stamp" ] && [ "$(cat "$stamp")" = "$(want_stamp)" ]
}

# require_fetch_tools fails with an explanation unless Maven and a JDK compiler are installed.
require_fetch_tools() {
	if ! command -v "$mvn_cmd" >/dev/null 2>&1; then
		die "Maven is required to fetch Apache Kafka $version from Maven Central and '$mvn_cmd' was not found. On Debian: apt-get update && apt-get install -y maven"
	fi
	if [ -z "$(javac_bin)" ]; then
		die "a JDK (javac) is required to build the readiness probe and no 'javac' was found. On Debian: apt-get install -y openjdk-17-jdk-headless"
	fi
}

# with_lock NAME CMD...: runs CMD holding <cache>/.NAME.lock, so that parallel calls queue up.
with_lock() {
	local name=$1
	shift
	mkdir -p "$cache"
	(
		flock 9
		"$@"
	) 9>"$cache/.$name.lock"
}

do_fetch() {
	if cached; then
		return 0
	fi
	require_java
	require_fetch_tools
	say "fetching Apache Kafka $version and its runtime dependencies from Maven Central into $home"
	local t0=$SECONDS tmp=$home.tmp.$$
	rm -rf "$tmp"
	mkdir -p "$tmp"
	# shellcheck disable=SC2064 # expand $tmp now
	trap "rm -rf '$tmp'" EXIT
	if ! "$mvn_cmd" -B -q --no-transfer-progress -Dstyle.color=never -f "$pom" \
		dependency:copy-dependencies -DincludeScope=runtime -DoutputDirectory="$tmp/libs" 2>&1 |
		sed -e 's/\x1b\[[0-9;]*m//g' -e '/^$/d' >&2; then
		die "mvn could not fetch Apache Kafka $version (see above)"
	fi
	[ -f "$tmp/libs/kafka_2.13-$version.jar" ] || die "mvn ran but kafka_2.13-$version.jar is not in $tmp/libs"
	mkdir -p "$tmp/classes"
	"$(javac_bin)" -nowarn -d "$tmp/classes" -cp "$tmp/libs/*" "$probe_src" >&2 ||
		die "javac could not compile $probe_src"
	want_stamp >"$tmp/.complete"
	rm -rf "$home"
	mv "$tmp" "$home"
	trap - EXIT
	say "fetched Apache Kafka $version ($(du -sh "$libs" | cut -f1)) in $((SECONDS - t0))s"
}

cmd_fetch() {
	if cached; then
		return 0
	fi
	with_lock fetch do_fetch
}

# java_run LEVEL ARGS...: runs java on Kafka's class path with the tools' logging.
java_run() {
	local level=$1
	shift
	"$(java_bin)" -Xmx256m -XX:+UseSerialGC -XX:TieredStopAtLevel=1 -Djava.awt.headless=true \
		-Dlog4j2.configurationFile="$log4j_conf" -Dtributary.kafka.loglevel="$level" \
		-cp "$classes:$libs/*" "$@"
}

# alive PID: the process exists and is not a zombie.
alive() {
	local pid=$1 st
	[ -n "$pid" ] || return 1
	kill -0 "$pid" 2>/dev/null || return 1
	if [ -r "/proc/$pid/stat" ]; then
		st=$(sed 's/^.*) //' "/proc/$pid/stat" 2>/dev/null | cut -d' ' -f1)
		[ "$st" != Z ] || return 1
	fi
	return 0
}

# running_pid prints the pid of the broker recorded in the state folder if it still runs.
running_pid() {
	local pid
	[ -f "$state/pid" ] || return 1
	pid=$(cat "$state/pid")
	alive "$pid" || return 1
	# Guard against a recycled pid: it must be our kafka.Kafka with our server.properties.
	if [ -r "/proc/$pid/cmdline" ]; then
		tr '\0' ' ' <"/proc/$pid/cmdline" | grep -q "kafka.Kafka $state/server.properties" || return 1
	fi
	echo "$pid"
}

running_addr() {
	running_pid >/dev/null || return 1
	[ -s "$state/address" ] || return 1
	cat "$state/address"
}

write_config() {
	local port=$1 cport=$2
	cat >"$state/server.properties" <<EOF
# Written by deploy/kafka/kafka.sh: Apache Kafka $version, one node, KRaft combined mode.
process.roles=broker,controller
node.id=1
controller.quorum.voters=1@127.0.0.1:$cport
listeners=PLAINTEXT://127.0.0.1:$port,CONTROLLER://127.0.0.1:$cport
advertised.listeners=PLAINTEXT://127.0.0.1:$port
listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT
inter.broker.listener.name=PLAINTEXT
controller.listener.names=CONTROLLER
log.dirs=$state/data
num.partitions=1
default.replication.factor=1
min.insync.replicas=1
auto.create.topics.enable=false
delete.topic.enable=true
offsets.topic.replication.factor=1
offsets.topic.num.partitions=3
transaction.state.log.replication.factor=1
transaction.state.log.min.isr=1
transaction.state.log.num.partitions=3
share.coordinator.state.topic.replication.factor=1
share.coordinator.state.topic.min.isr=1
share.coordinator.state.topic.num.partitions=1
group.initial.rebalance.delay.ms=0
log.segment.bytes=16777216
log.retention.hours=1
num.network.threads=2
num.io.threads=4
num.recovery.threads.per.data.dir=1
EOF
}

# stop_pid PID: SIGTERM, then SIGKILL after the stop timeout; waits until it is gone.
stop_pid() {
	local pid=$1 i
	alive "$pid" || return 0
	kill -TERM "$pid" 2>/dev/null || true
	for ((i = 0; i < stop_timeout * 4; i++)); do
		alive "$pid" || return 0
		sleep 0.25
	done
	say "broker $pid did not stop within ${stop_timeout}s: killing it"
	kill -KILL "$pid" 2>/dev/null || true
	for ((i = 0; i < 40; i++)); do
		alive "$pid" || return 0
		sleep 0.25
	done
	die "broker $pid is still alive after SIGKILL"
}

# launch_ready ADDR starts the broker of $state/server.properties in the background, records
# its pid (also in $pid) and address, and waits until it answers there; it fails when it does
# not within the start timeout.
launch_ready() {
	launch "$1"
	pid=$(cat "$state/pid")
	java_run ERROR KafkaProbe ready "$1" "$start_timeout" "$pid" 2>>"$state/probe.log"
}

launch() {
	# setsid: its own session, so that the terminal's or make's signals do not reach it; all
	# its output to the log, and no inherited descriptors, so that $(kafka.sh up) returns.
	# shellcheck disable=SC2086 # KAFKA_HEAP_OPTS holds several options
	setsid "$(java_bin)" ${KAFKA_HEAP_OPTS:--Xms256m -Xmx512m} -XX:+UseG1GC -XX:MaxGCPauseMillis=20 \
		-XX:+ExitOnOutOfMemoryError -Djava.awt.headless=true \
		-Dlog4j2.configurationFile="$log4j_conf" -Dtributary.kafka.loglevel=INFO \
		-cp "$libs/*" kafka.Kafka "$state/server.properties" \
		</dev/null >>"$state/kafka.log" 2>&1 9>&- &
	echo "$!" >"$state/pid"
	echo "$1" >"$state/address"
}

# do_start starts the broker again on the state folder `up` made — same node, ports and data —
# after it was killed (the chaos harness kills and restarts it).
do_start() {
	local addr pid t0=$SECONDS
	if addr=$(running_addr); then
		echo "$addr"
		return 0
	fi
	[ -f "$state/server.properties" ] && [ -f "$state/address" ] || die "no broker state in $state to start from (use: $0 up)"
	addr=$(cat "$state/address")
	say "starting Apache Kafka $version again on $addr (state $state)"
	if launch_ready "$addr"; then
		say "Apache Kafka $version is up again at $addr (pid $pid, $((SECONDS - t0))s)"
		echo "$addr"
		return 0
	fi
	say "Apache Kafka did not start again; last lines of $state/kafka.log:"
	tail -n 60 "$state/kafka.log" >&2 || true
	exit 1
}

cmd_start() {
	require_java
	cmd_fetch
	with_lock run do_start
}

do_up() {
	local addr
	if addr=$(running_addr); then
		say "Apache Kafka $version already runs at $addr"
		echo "$addr"
		return 0
	fi
	local attempt ports port cport cluster_id pid t0=$SECONDS
	for attempt in 1 2 3; do
		rm -rf "$state"
		mkdir -p "$state/data"
		mapfile -t ports < <(java_run WARN KafkaProbe ports 2)
		[ "${#ports[@]}" = 2 ] || die "could not pick free ports"
		port=${ports[0]}
		cport=${ports[1]}
		write_config "$port" "$cport"
		cluster_id=$(java_run WARN kafka.tools.StorageTool random-uuid 2>>"$state/format.log") ||
			die "kafka.tools.StorageTool random-uuid failed: $(cat "$state/format.log")"
		if ! java_run WARN kafka.tools.StorageTool format -t "$cluster_id" -c "$state/server.properties" \
			>>"$state/format.log" 2>&1; then
			tail -n 40 "$state/format.log" >&2
			die "kafka.tools.StorageTool format failed (log above: $state/format.log)"
		fi
		say "starting Apache Kafka $version (cluster $cluster_id) on 127.0.0.1:$port, controller on 127.0.0.1:$cport"
		if launch_ready "127.0.0.1:$port"; then
			say "Apache Kafka $version is up at 127.0.0.1:$port (pid $pid, $((SECONDS - t0))s; log: $state/kafka.log)"
			echo "127.0.0.1:$port"
			return 0
		fi
		local exited=false
		alive "$pid" || exited=true
		stop_pid "$pid"
		if [ "$attempt" -lt 3 ] && grep -qi 'address already in use' "$state/kafka.log"; then
			say "a port was taken before the broker bound it; trying other ports"
			continue
		fi
		if ! $exited; then
			say "Apache Kafka did not answer within ${start_timeout}s: $(grep '^kafka-probe:' "$state/probe.log" | tail -n 1)"
		else
			say "Apache Kafka exited during start-up"
		fi
		say "last lines of $state/kafka.log:"
		tail -n 60 "$state/kafka.log" >&2 || true
		rm -f "$state/pid"
		exit 1
	done
}

cmd_up() {
	local addr
	if addr=$(running_addr); then
		echo "$addr"
		return 0
	fi
	require_java
	cmd_fetch
	with_lock run do_up
}

do_down() {
	local pid
	if pid=$(running_pid); then
		say "stopping Apache Kafka (pid $pid, $(cat "$state/address" 2>/dev/null || echo '?'))"
		stop_pid "$pid"
		say "stopped"
	else
		say "no Apache Kafka of kafka.sh runs"
	fi
	rm -rf "$state"
}

cmd_down() {
	with_lock run do_down
}

cmd_brokers() {
	local addr
	if addr=$(running_addr); then
		echo "$addr"
	else
		say "no Apache Kafka of kafka.sh runs (start one with: $0 up)"
		exit 1
	fi
}

cmd_status() {
	local addr
	echo "Apache Kafka $version (pinned in $pom)"
	if cached; then echo "cache: $home (complete)"; else echo "cache: $home (not fetched)"; fi
	if addr=$(running_addr); then
		echo "running: $addr (pid $(cat "$state/pid"), state $state)"
	else
		echo "running: no"
		exit 1
	fi
}

cmd_check() {
	require_java
	if ! cached; then
		require_fetch_tools
	fi
	say "ok: Java $(java_major "$(java_bin)") and $(if cached; then echo "a fetched Apache Kafka $version"; else echo "Maven to fetch Apache Kafka $version"; fi)"
}

cmd_smoke() {
	local addr=${1:-}
	if [ -z "$addr" ]; then
		addr=$(running_addr) || die "no Apache Kafka of kafka.sh runs (start one with: $0 up, or pass an address)"
	fi
	require_java
	cmd_fetch
	java_run WARN KafkaProbe smoke "$addr"
}

cmd_logs() {
	[ -f "$state/kafka.log" ] || die "no broker log at $state/kafka.log"
	tail -n "${1:-100}" "$state/kafka.log"
}

usage() {
	sed -n '2,18s/^# \{0,1\}//p' "$0" >&2
	exit 2
}

case ${1:-} in
fetch) cmd_fetch ;;
up) cmd_up ;;
start) cmd_start ;;
down) cmd_down ;;
brokers) cmd_brokers ;;
status) cmd_status ;;
check) cmd_check ;;
smoke) cmd_smoke "${2:-}" ;;
logs) cmd_logs "${2:-}" ;;
-h | --help | help) usage ;;
*) usage ;;
esac
