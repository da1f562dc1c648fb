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
	var notArray error
	// The batch array is validated and split into its elements in one pass.
	scan := func(key []byte, kEsc bool, data []byte, i int) (int, bool, error) {
		if !keyIs(key, kEsc, "batch") || i >= len(data) {
			return i, false, nil // skipValue reports a truncated value
		}
		if data[i] != '[' {
			notArray = &DecodeError{Field: "batch", Msg: "must be an array"}
			return i, false, nil // validated by skipValue; reported below
		}
		notArray = nil // a repeated "batch": the last one counts
		end, msgs, err := scanArray(data, i, b.Messages[:0])
		b.Messages = msgs
		return end, true, err
	}
	err := eachMemberScan(data, scan, func(key []byte, kEsc bool, v []byte) error {
		var err error
		switch string(keyBytes(key, kEsc)) {
		case "batch":
			sawBatch = true
			if notArray != nil {
				return notArray
			}
			for _, m := range b.Messages {
				if m[0] != '{' {
					return &DecodeError{Field: "batch", Msg: "every element must be an object"}
				}
			}
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
// scanArray validates the array at b[i] (depth 1) and appends each element's bytes to out.
func scanArray(b []byte, i int, out []json.RawMessage) (int, []json.RawMessage, error) {
	i = skipSpace(b, i+1)
	if i < len(b) && b[i] == ']' {
		return i + 1, out, nil
	}
	for {
		start := i
		var err error
		if i, err = skipValue(b, i, 2); err != nil {
			return i, out, err
		}
		out = append(out, json.RawMessage(b[start:i]))
		i = skipSpace(b, i)
		if i >= len(b) {
			return i, out, &syntaxError{"unexpected end of input in an array", i}
		}
		if b[i] == ']' {
			return i + 1, out, nil
		}
		if b[i] != ',' {
			return i, out, &syntaxError{"expected ',' or ']' in an array", i}
		}
		i = skipSpace(b, i+1)
	}
}
