// Package views holds the console's in-memory views of its Kafka topics: the delivery log and
// its counters (Attempts), the same attempts grouped by message and indexed for search
// (Messages, docs/console.md#messages), what became of each destination's messages (Health:
// the stats' message counters and the delivery funnel), the source debugger's recent events (Events), the regulations
// (Regulations), the DLQ list (DLQ), the retry tiers' backlog (TierLag) and the audit trail's
// last records (Audit). Each view keeps its
// lock and its fields to itself: its topic reader (the console's wiring, one
// platform.TopicReader each) applies records through its Add-style methods, the API and UI
// handlers read it through query methods that return copies, and it forgets a deleted or
// suppressed user's entries, or a deleted object's, through its own Forget and Prune methods
// (docs/console.md#what-the-console-forgets). A view that keeps "the last N" of something keeps
// them in a Ring (Messages, whose entries change after they were added and are found through
// indexes, keeps them oldest first in a slice its indexes follow); a list that pages does it
// with Paginate.
package views
