//go:build race

package deliverer_test

func init() { raceDetector = true }
