package deliverer

import (
	"context"
	"fmt"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/tributary-cdp/tributary/schemas"
)

// reportRegulation writes the deliverer's report on one deletion request to
// tracking.deletions.status (a schemas.DeletionReport keyed "<requestId>/deliverer",
// docs/topics.md#trackingdeletionsstatus), returning once Kafka acknowledged it. The deliverer
// calls it when it has applied the request: from then on it drops the user's waiting
// deliveries (dropped counts those it dropped so far, schemas.CountDropped). requestID is the
// request's requestId, else the id the router derived for it (<topic>-<partition>-<offset>).
// The console's regulation is FINISHED once every expected store reported
// (docs/console.md#regulations). Safe for concurrent use.
func (s *Service) reportRegulation(ctx context.Context, req *schemas.DeletionRequest, requestID string, dropped int64) error {
	rep := schemas.DeletionReport{RequestID: requestID, UserID: req.UserID, Store: schemas.StoreDeliverer, Kind: req.Kind,
		Counts: map[string]int64{schemas.CountDropped: dropped}, DoneAt: schemas.FormatTimestamp(s.now())}
	rec := &kgo.Record{Topic: s.cfg.DeletionsStatusTopic, Key: []byte(schemas.DeletionReportKey(requestID, schemas.StoreDeliverer)), Value: rep.Record()}
	if err := s.cl.ProduceSync(ctx, rec).FirstErr(); err != nil {
		return fmt.Errorf("producing to %s: %w", rec.Topic, err)
	}
	return nil
}
