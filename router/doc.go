// Package router will consume tracking.events, apply integrations switches, tracking plans and
// suppression, and fan each message out as a delivered webhook body to webhooks.deliveries; it also
// turns deletion requests into delete notices.
package router
