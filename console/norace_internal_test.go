//go:build !race

package console

const underRace = false
