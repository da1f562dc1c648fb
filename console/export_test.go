package console

// Prune runs the views' pruning now (tests).
func (s *Service) Prune() { s.prune() }
