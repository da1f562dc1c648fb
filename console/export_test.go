package console

// Prune runs the views' pruning now (tests).
func (s *Service) Prune() { s.prune() }

// PinPII makes every request of the console that of a principal with (pii) or without the PII
// grant, whoever makes it (docs/console.md#pii-access); PinPII(true) after PinPII(false)
// restores the grant.
func (s *Service) PinPII(pii bool) {
	p := Principal{Name: "pii-test", Role: RoleViewer, PII: pii}
	s.pinnedPrincipal.Store(&p)
}
