// Package deploytest tests the deployment files of deploy/ and docker-compose.yml without a
// container engine or a Kubernetes cluster. Everything is in its tests:
//
//   - TestComposeConfig: `docker-compose config -q` (Debian's docker-compose) accepts
//     docker-compose.yml given the variables it requires (AUDIENCES_TOKEN), and refuses it
//     without one of them.
//   - TestComposeKafkaVersion: the compose file's apache/kafka image is the release that
//     deploy/kafka/pom.xml pins for the tests.
//   - TestDockerfile: every image target of deploy/docker/Dockerfile installs the binary of the
//     same name, built by the build stage, as its ENTRYPOINT; hadolint, when installed, is clean.
//   - TestComposeEnvNames, TestHelmEnvNames: every environment variable the deployment files set
//     is one that the component's code reads (a misspelt name fails).
//   - TestComposeTopology: the compose topology as processes. Each Tributary service of
//     docker-compose.yml runs from a freshly built binary with exactly the environment and
//     command that compose and the Dockerfile give its container, in depends_on order, against
//     the Apache Kafka broker of APACHE_KAFKA_BROKERS; a track call sent to ingest's published
//     port arrives, signed and verified, at the demo receiver, the audiences profile API on its
//     published port refuses a call without its token and answers with the profiles of the
//     calls' users with it, the console's admin API on its published port refuses a call
//     without its token and one with a foreign Host (421) and lists the config's sources with
//     it, and its web UI, signed in with the token, looks a user's profile up in the audiences
//     service (CONSOLE_AUDIENCES_URL). Of compose's interpolation, ${NAME:-default} is read as
//     its default and ${NAME:?message} as "deploytest-<name>" (requiredValue).
//   - TestComposeConsoleEnv: the console's CONSOLE_AUDIENCES_URL, CONSOLE_INGEST_URL and
//     AUDIENCES_TOKEN in docker-compose.yml name the audiences service's API, ingest's
//     published port and the audiences service's token.
//   - TestComposeHostsAndToken: ingest, audiences and the console each answer only their own
//     names (INGEST_ALLOWED_HOSTS, AUDIENCES_ALLOWED_HOSTS, CONSOLE_ALLOWED_HOSTS), and
//     AUDIENCES_TOKEN has no default in the file (${AUDIENCES_TOKEN:?...}).
//   - TestHelmChart: `helm lint` and `helm template` of deploy/helm/tributary, with Helm built
//     from the Go module pinned in deploy/helm/tools, for the default values and
//     ci/external-kafka-values.yaml; every rendered object decodes strictly into its Kubernetes
//     API type and refers correctly to the others (deploy/helm/tools/cmd/kubecheck); the
//     audiences StatefulSet's identity, peer URL, Services and token, and the console
//     Deployment's replicas (console.replicas, 2 as well) and rolling strategy, addresses (the UI and API on port
//     http, /metrics on port metrics), token Secret (the chart's or an existing one), links to
//     the audiences API and ingest, Service, ServiceMonitor and Ingress (/ of port http) are
//     wired as docs/operations.md says; the profile API's token is generated into a Secret of
//     the chart (or taken from audiences.token.value or an existing Secret) and given to the
//     audiences pods and the console, whose pods roll when it changes; the ALLOWED_HOSTS
//     settings name the Services, the Ingress hosts and the values' extra names; the
//     NetworkPolicies let only the console and the audiences replicas reach the profile API,
//     only networkPolicy.metricsFrom the metrics ports; the install notes name them, the
//     chart refuses a console without a token, a short audiences.token.value,
//     console.replicas below 1 and console.autoscaling, and no ServiceMonitor selects two
//     Services.
//
// How the topology test maps a container to a process: a compose service name in any variable
// (kafka:9092, receiver:9000) or mounted file becomes 127.0.0.1; a listen address on 0.0.0.0:PORT
// becomes 127.0.0.1 on a free port, and every reference to that service's PORT (in variables,
// mounted files, healthchecks and published ports) follows it; the kafka service becomes the
// Apache Kafka broker; a bind-mounted file is read from the repository (through a copy with the
// names rewritten when it mentions a service).
package deploytest
