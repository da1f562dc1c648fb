// Package platform is the shared runtime of every Tributary service. Each service's main wires
// these pieces together; nothing here keeps package-level state or handles signals on its own.
//
//   - Settings: [LoadSettings] reads a settings struct the one way every command does
//     (docs/configuration.md#run-time-settings): its defaults, the environment on top
//     ([FromEnv]), then its Validate, every error naming its variable; [KafkaSettings] (read
//     by [LoadKafkaSettings]), [CommandSettings] and [InitSettings] are the shared ones.
//   - Dependencies: [Deps] (Kafka settings and client options, logger, metrics registerer and
//     gatherer, [Health]) is embedded in every service's Deps and built once per process:
//     by [Command.Deps] in a service's command, once for all five services in `make run`
//     (docs/architecture.md#how-a-service-is-wired).
//   - Kafka clients: [KafkaSettings.ClientOpts] and [NewKafkaClient] build franz-go clients
//     whose internal logs go to zerolog ([NewKgoLogger]).
//   - Topic bootstrap: [DefaultTopics] lists every topic of docs/topics.md with its partitions,
//     retention and cleanup policy; [EnsureTopics] creates what is missing, idempotently.
//   - The config store: [ApplyConfigFile] makes tributary.config hold what a file declares for
//     the objects it manages (declarative; [ApplyConfig] upserts); [ConfigStore] materialises that topic into an
//     immutable [Snapshot] that every service reads without locks, committed records only.
//     Every writer of the topic that checks before it writes goes through [ConfigWriter]: one
//     transactional id, so that each write fences the others before it reads and checks
//     (docs/console.md#more-than-one-console).
//   - Kafka loops: [Pipe] is the one consume → transform → produce → commit loop over a
//     consumer group (exactly once in transactions, or at least once: commit only after every
//     acknowledgement), with a bounded stop; [TopicReader] is the one read-to-the-end loop
//     without a group: topics (or chosen partitions) from their start, from a time or their
//     last N records, committed records only or all, to the end offsets found at start, then
//     optionally following — the config store, the regulations, the DLQ, the state restores
//     ([ReadCommittedRange]) and the console's views are configurations of it
//     (docs/architecture.md#reading-topics); [RetryUntil] is the one retry-until-acknowledged
//     loop; [ReadGroupLag] is the one reading of consumer groups' lag ([LagCollector], the
//     console's overview).
//   - The dead-letter queue: [ListDeadLetters] and [ReplayDeadLetters] (filtered by
//     [ReplayFilter], optionally to another URL: [ReplayOptions]) list and replay webhooks.dlq
//     for `deliverer dlq list`, `deliverer replay` and the console, once per message: a
//     message's newest dead letter stands for it ([DeadLetter.MessageKey]); a deleted or
//     suppressed user's dead letters are skipped ([ReplayOptions.Skipped]).
//   - Regulations: [Regulations] holds the suppressed users (tracking.suppressions) and when
//     each deleted user was deleted (tracking.deletions.status), read whole by every replica;
//     [Regulations.Forgets] is the one check of a delivery record against them, shared by the
//     router's suppression list, the deliverer at egress and DLQ replays
//     (docs/delivery.md#deleted-and-suppressed-users).
//   - Logging: [NewLogger] (LOG_LEVEL; JSON, or pretty on a terminal).
//   - Tracing: [TraceContext] is an event's W3C traceparent and tracestate, read from a request
//     ([TraceFromHTTP]) or a record ([TraceFromRecord]) and written onward ([TraceContext.AppendHeaders]),
//     always on and allocation-free; [Tracer] (nil: export off) starts the spans and exports
//     them over OTLP as [TracingSettings] (the OTEL_* variables) say; [Command.Trace] builds a
//     service's (docs/operations.md#tracing).
//   - HTTP: [HTTPServer] serves /healthz, /readyz, Prometheus /metrics and the service's own
//     handler with hardened timeouts, and drains in-flight requests on shutdown; [Health]
//     holds the readiness of a service's components ([Health.Scope]: a view for one of several
//     services sharing one).
//   - Lifecycle: [Runner], [RunAll], [RunWithin], [GraceContext] and, for mains only,
//     [SignalContext].
//
// The embedded broker (franz-go's kfake with on-disk persistence) lives in the sub-package
// platform/embedded so that production services do not link it, and the test helpers shared by
// every module (a fresh embedded cluster per test, the Apache Kafka conformance switch, unique
// topic names) in platform/kafkatest.
package platform
