package console

import (
	"fmt"
	"net/http"
	"sync"
)

// streamLimits counts the open live streams (docs/console.md#live-stream-limits): at most max
// on the console, perClient per client (a UI session; the API's callers, who share its one
// token, together). Safe for concurrent use.
type streamLimits struct {
	mu             sync.Mutex
	max, perClient int
	total          int
	clients        map[string]int
}

func newStreamLimits(max, perClient int) *streamLimits {
	return &streamLimits{max: max, perClient: perClient, clients: map[string]int{}}
}

// acquire takes a stream for client, or returns the 429 error that refuses it; release gives
// it back.
func (l *streamLimits) acquire(client string) (release func(), err *apiError) {
	l.mu.Lock()
	defer l.mu.Unlock()
	switch {
	case l.total >= l.max:
		return nil, &apiError{Status: http.StatusTooManyRequests, Code: codeTooManyStreams,
			Message: fmt.Sprintf("the console has %d live streams open, its limit (CONSOLE_MAX_STREAMS): try again when one ends", l.total)}
	case l.clients[client] >= l.perClient && client == apiStreamClient:
		return nil, &apiError{Status: http.StatusTooManyRequests, Code: codeTooManyStreams,
			Message: fmt.Sprintf("the API's callers have %d live streams open, their limit (CONSOLE_MAX_STREAMS_PER_SESSION, shared by every caller of the token): close one first", l.clients[client])}
	case l.clients[client] >= l.perClient:
		return nil, &apiError{Status: http.StatusTooManyRequests, Code: codeTooManyStreams,
			Message: fmt.Sprintf("you have %d live streams open, the limit per session (CONSOLE_MAX_STREAMS_PER_SESSION): close one (a tab of a source's page) first", l.clients[client])}
	}
	l.total++
	l.clients[client]++
	var once sync.Once
	return func() {
		once.Do(func() {
			l.mu.Lock()
			defer l.mu.Unlock()
			l.total--
			if l.clients[client]--; l.clients[client] <= 0 {
				delete(l.clients, client)
			}
		})
	}, nil
}

// apiStreamClient is the stream client of every API caller: they share CONSOLE_TOKEN.
const apiStreamClient = "api"
