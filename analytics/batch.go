package analytics

import (
	"context"
	"time"
)

// batch is up to FlushAt messages, at most MaxBatchBytes of JSON. The messages are written
// straight into body, the request body of /v1/batch without its tail ("sentAt" is added per
// attempt), so that sending needs no further encoding and queueing allocates nothing per
// message.
type batch struct {
	body []byte   // `{"batch":[` m0 `,` m1 ...
	refs []msgRef // one per message, in order
	keys []byte   // the Kafka record keys, back to back (Kafka transport only)
	todo []int32  // scratch for deliver
	res  *result
}

// msgRef locates one message in its batch and carries its outcome.
type msgRef struct {
	msg          Message
	start, end   int32 // its JSON: body[start:end]
	kstart, kend int32 // its key: keys[kstart:kend]
	err          error // nil: delivered
}

// result is what a Flush or Close waiting on a batch learns once done is closed.
type result struct {
	done     chan struct{}
	total    int // set when the batch is sealed
	failed   int // set, like firstErr, before done is closed
	firstErr error
}

const batchHead = `{"batch":[`

// batchTailMax bounds the tail written per attempt: `],"sentAt":"2006-01-02T15:04:05.000Z"}`.
const batchTailMax = 64

func newBatch() *batch {
	return &batch{body: append(make([]byte, 0, 16<<10), batchHead...)}
}

// fits reports whether one more message of n bytes keeps the body within MaxBatchBytes and
// the batch within MaxBatchMessages.
func (b *batch) fits(n int) bool {
	return len(b.refs) < MaxBatchMessages && len(b.body)+1+n+batchTailMax <= MaxBatchBytes
}

func (b *batch) add(msg Message, data []byte, key string) {
	if len(b.refs) > 0 {
		b.body = append(b.body, ',')
	}
	start := len(b.body)
	b.body = append(b.body, data...)
	kstart := len(b.keys)
	b.keys = append(b.keys, key...)
	b.refs = append(b.refs, msgRef{msg: msg, start: int32(start), end: int32(len(b.body)), kstart: int32(kstart), kend: int32(len(b.keys))})
}

// messagesEnd is where the tail of the body starts.
func (b *batch) messagesEnd() int {
	if len(b.refs) == 0 {
		return len(batchHead)
	}
	return int(b.refs[len(b.refs)-1].end)
}

// withTail returns the complete /v1/batch body, sentAt being now.
func (b *batch) withTail(now time.Time) []byte {
	b.body = append(b.body[:b.messagesEnd()], `],"sentAt":"`...)
	b.body = appendTime(b.body, now)
	b.body = append(b.body, `"}`...)
	return b.body
}

// value returns the JSON of message i and its record key.
func (b *batch) value(i int32) (value, key []byte) {
	r := &b.refs[i]
	return b.body[r.start:r.end], b.keys[r.kstart:r.kend]
}

// reset empties b for reuse, keeping its buffers (large ones are dropped).
func (b *batch) reset() {
	if cap(b.body) > 2*MaxBatchBytes {
		b.body = make([]byte, 0, 16<<10)
	}
	b.body = append(b.body[:0], batchHead...)
	clear(b.refs) // release the messages
	b.refs = b.refs[:0]
	b.keys = b.keys[:0]
	b.res = nil
}

// transport sends the messages todo of a batch once. It sets refs[i].err for a message that
// failed for good (a per-message refusal, or a whole batch refused for a reason retrying
// cannot fix) and returns the messages worth another attempt with the error that made them
// so; a *RetryAfterError asks for a minimum wait.
type transport interface {
	send(ctx context.Context, b *batch, todo []int32) (retry []int32, err error)
	close() error
}
