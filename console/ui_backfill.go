package console

import (
	"strconv"

	"github.com/tributary-cdp/tributary/schemas"
)

// backfillText is the line the audience pages show while an audience is being backfilled from
// tracking.events' retention (docs/audiences.md#backfill); "" when it is done or has nothing to
// backfill.
func backfillText(b *schemas.BackfillView) string {
	if b == nil || b.State != "running" {
		return ""
	}
	s := "Backfilling from tracking.events: " + strconv.Itoa(b.PartitionsDone) + " of " + plural(b.Partitions, "partition") +
		" done, " + fmtCount(int(b.EventsRead)) + " events read"
	if b.From != "" && b.To != "" {
		s += " (" + b.From + " to " + b.To + ")"
	}
	return s + ". It sends nothing until every partition is done."
}
