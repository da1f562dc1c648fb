package console

import "context"

// Prune runs the views' pruning now (tests).
func (s *Service) Prune() { s.prune() }

// ReportRegulation writes the console's own report on a regulation (tests).
func (s *Service) ReportRegulation(ctx context.Context, requestID, userID, kind string, purged int64) error {
	return s.reportRegulation(ctx, requestID, userID, kind, purged)
}
