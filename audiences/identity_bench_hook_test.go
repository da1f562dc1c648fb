package audiences

// finishBench ends a batch's processing as transform does before producing.
func finishBench(b *batch) { b.encodeLinks() }
