package deliverer_test

import (
	"net/http"
	"testing"
	"time"
)

// A slow or dead endpoint must not hold back the others: the healthy endpoint's throughput
// with a never-answering endpoint beside it stays within 10% of its throughput alone.
func TestIsolationDeadEndpointDoesNotSlowHealthyOne(t *testing.T) {
	if testing.Short() {
		t.Skip("throughput comparison")
	}
	skipUnderRace(t)
	const n = 6000
	measure := func(withDead bool) float64 {
		healthy := newReceiver(t, ok200)
		dead := newReceiver(t, func(_ int, r *http.Request, _ http.ResponseWriter) { <-r.Context().Done() })
		h := newHarness(t, "10s,1m", destYAML(dest("healthy", []string{healthy.URL}, ""), dest("dead", []string{dead.URL}, "")))
		h.run(h.config())
		for b := 0; b < n; b += 500 {
			ids := messageIDs(b, b+500)
			if withDead {
				h.send("dead", ids...) // interleaved in the same partitions, ahead of the healthy ones
			}
			h.send("healthy", ids...)
		}
		got := healthy.waitRequests(t, n, 60*time.Second)
		return float64(n) / got[n-1].at.Sub(got[0].at).Seconds()
	}
	var alone, mixed float64
	for try := 1; try <= 5; try++ { // the machine is noisy (and make test runs packages in parallel): up to five paired measurements
		alone, mixed = measure(false), measure(true)
		t.Logf("try %d: healthy alone %.0f/s, beside a dead endpoint %.0f/s (ratio %.2f)", try, alone, mixed, mixed/alone)
		if mixed >= 0.9*alone {
			return
		}
	}
	t.Fatalf("healthy endpoint at %.0f/s beside a dead one, %.0f/s alone: more than 10%% slower", mixed, alone)
}
