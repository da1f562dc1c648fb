package schemas

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
)

// ReplayMark is the value of one webhooks.dlq.replayed record (docs/topics.md#webhooksdlqreplayed),
// keyed ReplayMarkKey(partition, offset) of the dead letter in webhooks.dlq: the dead letter was
// replayed, so a replay does not send it again. platform.ReplayDeadLetters writes it (`deliverer
// replay`, the console); `deliverer dlq list`, the replay and the console's DLQ view read it.
type ReplayMark struct {
	// ReplayedAt is when the dead letter was replayed (FormatTimestamp).
	ReplayedAt    string `json:"replayedAt"`
	DestinationID string `json:"destinationId"`
	MessageID     string `json:"messageId"`
	// URL is the URL it was replayed to, without credentials (RedactURL); absent when it went
	// to its destination's webhooks.
	URL string `json:"url,omitempty"`
	// SupersededBy is set on the mark of an older dead letter of a replayed message: the marker
	// key of the newest one, which the replay sent instead.
	SupersededBy string `json:"supersededBy,omitempty"`
}

// Record encodes the mark's value.
func (m ReplayMark) Record() []byte {
	b, _ := json.Marshal(m) // cannot fail: strings only
	return b
}

// DecodeReplayMark decodes one webhooks.dlq.replayed value as encoding/json does (keys matched
// case-insensitively, unknown members ignored, a member of the wrong type an error).
func DecodeReplayMark(data []byte) (ReplayMark, error) {
	var m ReplayMark
	if err := json.Unmarshal(data, &m); err != nil {
		return ReplayMark{}, fmt.Errorf("replay mark: %w", err)
	}
	return m, nil
}

// ReplayMarkKey is the key of a dead letter's replay mark: "<partition>:<offset>" of the dead
// letter in webhooks.dlq.
func ReplayMarkKey(partition int32, offset int64) string {
	return strconv.Itoa(int(partition)) + ":" + strconv.FormatInt(offset, 10)
}

// ParseReplayMarkKey reads a ReplayMarkKey; false when key is none.
func ParseReplayMarkKey(key string) (partition int32, offset int64, ok bool) {
	ps, os, ok := strings.Cut(key, ":")
	p, err1 := strconv.ParseInt(ps, 10, 32)
	o, err2 := strconv.ParseInt(os, 10, 64)
	return int32(p), o, ok && err1 == nil && err2 == nil
}
