package schemas

import "encoding/json"

// Operator notice types (docs/delivery.md#auto-disable).
const (
	// NoticeDestinationFailing: a destination's attempts have all failed for 50 % or 90 % of
	// its settings.autoDisable.after.
	NoticeDestinationFailing = "destination.failing"
	// NoticeDestinationDisabled: the budget is used up and the destination was disabled.
	NoticeDestinationDisabled = "destination.disabled"
)

// Notice is one operator notice: the value of a tributary.notices record (key: the destination
// id) and the body of the signed POST to OPERATOR_WEBHOOK_URL (docs/topics.md#tributarynotices).
type Notice struct {
	// ID is the same for every copy of one notice (destination, failingSince, percent): a
	// receiver de-duplicates on it.
	ID            string `json:"id"`
	Type          string `json:"type"`
	DestinationID string `json:"destinationId"`
	// Percent is the share of the budget used: 50, 90 or 100.
	Percent int `json:"percent"`
	// FailingSince is the first failed attempt after the destination's last delivered message.
	FailingSince string `json:"failingSince"`
	// After is the budget (settings.autoDisable.after), e.g. "72h".
	After string `json:"after"`
	// DisableAt is when the destination is (or was) disabled: FailingSince + After.
	DisableAt string `json:"disableAt"`
	// At is when the notice was made.
	At string `json:"at"`
}

// Record is the notice as JSON.
func (n Notice) Record() []byte {
	b, _ := json.Marshal(n) // strings and an int: cannot fail
	return b
}

// ParseNotice reads a tributary.notices value.
func ParseNotice(b []byte) (Notice, error) {
	var n Notice
	err := json.Unmarshal(b, &n)
	return n, err
}
