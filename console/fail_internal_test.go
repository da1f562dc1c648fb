package console

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/rs/zerolog"
	"github.com/twmb/franz-go/pkg/kerr"
)

// A write Kafka refuses as too large answers 413, never 500: the last resort behind each
// write's own size check (docs/console.md#request-limits).
func TestFailKafkaTooLarge(t *testing.T) {
	s := &Service{logger: zerolog.Nop()}
	for _, err := range []error{kerr.MessageTooLarge, kerr.RecordListTooLarge, fmt.Errorf("writing tributary.config: %w", kerr.MessageTooLarge)} {
		w := httptest.NewRecorder()
		s.fail(w, httptest.NewRequest(http.MethodPost, "/v1/regulations", nil), err)
		if w.Code != http.StatusRequestEntityTooLarge || !strings.Contains(w.Body.String(), `"code":"too_large"`) {
			t.Errorf("%v: %d %s, want 413 too_large", err, w.Code, w.Body)
		}
	}
	w := httptest.NewRecorder()
	s.fail(w, httptest.NewRequest(http.MethodPost, "/v1/regulations", nil), fmt.Errorf("writing: %w", kerr.NotLeaderForPartition))
	if w.Code != http.StatusInternalServerError {
		t.Errorf("another Kafka error: %d, want 500", w.Code)
	}
}
