//go:build race

package console

// underRace: the race detector allocates on its own, so allocation counts are not checked.
const underRace = true
