// Package router fans tracking.events out to the webhook destinations: for each message it
// finds the message's source in the live config, applies the source's tracking plan, the
// suppression list, the message's integrations switches and the destination's filters
// (docs/routing.md#destination-filters) to each enabled destination of that source, and writes
// one delivered webhook body per destination that takes it to webhooks.deliveries. It also turns tracking.deletions requests into delete notices and
// maintains the suppression list (tracking.suppressions).
//
// By default both consumers run consume-transform-produce in Kafka transactions
// (kgo.GroupTransactSession), so a router killed at any instant neither loses nor duplicates a
// delivery record; ROUTER_EXACTLY_ONCE=false switches to at-least-once. docs/routing.md holds
// the rules; docs/benchmarks.md the measured cost of each mode.
package router
