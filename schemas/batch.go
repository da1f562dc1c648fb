package schemas

import (
	"encoding/json"
	"errors"
	"time"
)

// Batch is the body of /v1/batch and /v1/import: the messages, kept as raw bytes (so each can
// be size-checked and, when invalid, forwarded as sent to tracking.rejected), and the
// batch-level fields that apply to every message.
type Batch struct {
	Messages     []json.RawMessage
	SentAt       time.Time
	Timestamp    time.Time
	MessageID    string
	WriteKey     string
	Context      json.RawMessage
	Integrations json.RawMessage
}

// DecodeBatch decodes a batch body. The "batch" array is required; its elements must be
// objects (their contents are checked by DecodeMessage). Unknown top-level fields are ignored.
func DecodeBatch(data []byte) (*Batch, error) {
	b := new(Batch)
	sawBatch := false
	err := eachMember(data, func(key []byte, kEsc bool, v []byte) error {
		var err error
		switch string(keyBytes(key, kEsc)) {
		case "batch":
			sawBatch = true
			b.Messages, err = splitArray(v)
		case "sentAt":
			b.SentAt, err = timeField("sentAt", v)
		case "timestamp":
			b.Timestamp, err = timeField("timestamp", v)
		case "messageId":
			b.MessageID, err = idField("messageId", v)
		case "writeKey":
			b.WriteKey, err = stringField("writeKey", v)
		case "context":
			b.Context, err = objectField("context", v)
		case "integrations":
			b.Integrations, err = objectField("integrations", v)
		}
		return err
	})
	var se *syntaxError
	switch {
	case errors.As(err, &se):
		return nil, &DecodeError{Msg: se.Error()}
	case errors.Is(err, errNotObject):
		return nil, &DecodeError{Msg: "a batch must be a JSON object"}
	case err != nil:
		return nil, err
	case !sawBatch:
		return nil, &DecodeError{Field: "batch", Msg: "required"}
	}
	return b, nil
}

// splitArray slices a valid JSON array into its elements, each of which must be an object.
func splitArray(v []byte) ([]json.RawMessage, error) {
	if v[0] != '[' {
		return nil, &DecodeError{Field: "batch", Msg: "must be an array"}
	}
	var out []json.RawMessage
	i := skipSpace(v, 1)
	if v[i] == ']' {
		return out, nil
	}
	for {
		end, _ := skipValue(v, i, 1) // v was validated
		if v[i] != '{' {
			return nil, &DecodeError{Field: "batch", Msg: "every element must be an object"}
		}
		out = append(out, json.RawMessage(v[i:end]))
		i = skipSpace(v, end)
		if v[i] == ']' {
			return out, nil
		}
		i = skipSpace(v, i+1)
	}
}
