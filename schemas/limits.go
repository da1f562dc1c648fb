package schemas

// Limits of the Segment tracking API (docs/ingest.md#limits), enforced by ingest and by the client
// library.
const (
	// MaxMessageBytes is the largest one call may be: 32 KB.
	MaxMessageBytes = 32 * 1024
	// MaxBatchBytes is the largest one batch request may be: 500 KB.
	MaxBatchBytes = 500 * 1024
	// MaxBatchMessages is the most messages one batch may hold.
	MaxBatchMessages = 2500
	// MaxMessageIDLength is the longest messageId accepted, in characters.
	MaxMessageIDLength = 100
	// maxDepth is the deepest nesting of JSON objects and arrays the decoder accepts.
	maxDepth = 128
)

// Message types. Clients send the first six; TypeDelete exists only in delivered bodies.
const (
	TypeIdentify = "identify"
	TypeTrack    = "track"
	TypePage     = "page"
	TypeScreen   = "screen"
	TypeGroup    = "group"
	TypeAlias    = "alias"
	TypeDelete   = "delete"
)
