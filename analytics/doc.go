// Package analytics is Tributary's Go client library (docs/client.md): it records identify, track,
// page, screen, group and alias calls from Go programs and sends them in batches, from
// background goroutines, to Tributary's ingest (the Segment tracking API) or straight to Kafka.
// It is safe to use on a busy web server: a call encodes its message and queues it; it never
// waits for the network.
//
//	client := analytics.New("wk_live_123") // the source's write key
//	client.Endpoint = "https://ingest.example.com" // default http://localhost:8080
//	defer client.Close()                           // sends what is queued, then stops
//
//	err := client.Track(&analytics.Track{
//		UserId:     "user-42",
//		Event:      "Order Completed",
//		Properties: map[string]any{"revenue": 39.95},
//	})
//
// # Calls
//
// Identify, Track, Page, Screen, Group and Alias take a pointer to a message struct. They
// return nil once the message is queued, or at once:
//
//   - a *ValidationError naming the missing or bad field: userId or anonymousId is required on
//     every call but alias, event on track, groupId on group, userId and previousId on alias;
//     a Timestamp that is not ISO 8601; a value JSON cannot hold (NaN, a channel);
//   - a *ValidationError matching ErrMessageTooLarge for a message over 32 KB (MaxMessageBytes);
//   - ErrQueueFull when QueueSize messages are already held (unless BlockWhenFull);
//   - ErrClosed after Close; a *ConfigError when a Client field cannot work.
//
// Every message gets a messageId (a random UUID), context.library (LibraryName, Version) and,
// unless Timestamp is set, the time of the call; a Timestamp that is set is sent exactly as
// given (historical import). Integrations selects destinations:
// analytics.Integrations{"All": false, "Webhooks": true}.
//
// # Batching and sending
//
// Messages are flushed when FlushAt (alias Size, default 20; 1 sends every call at once) are
// queued, or FlushAfter (default 5 s) after the previous flush. A batch never exceeds 500 KB
// (MaxBatchBytes) or 2,500 messages: a larger flush is split. Each batch is POSTed to
// Endpoint + "/v1/batch" with the write key as the HTTP Basic user name, a batch "sentAt",
// and gzip when the body is at least CompressAbove bytes (32 KiB). Network errors, 5xx, 408
// and 429 are retried with exponential backoff and jitter (cenkalti/backoff), at most
// MaxRetries times, honouring Retry-After; other 4xx answers are not retried. Messages that
// ingest rejects inside an accepted batch fail alone with a *RejectedError.
//
// Set Kafka to produce each message to tracking.inbound instead (segmentio/kafka-go, header
// write-key, key userId else anonymousId), with the same batching, limits and Close.
//
// # Outcomes, Flush and Close
//
// A Callback learns the outcome of every message. Flush(ctx) sends what is queued and waits
// for it. Close flushes, waits at most CloseTimeout (10 s) — messages still unsent then fail
// with ErrClosed — and returns once every goroutine the client started has stopped.
//
// # Logging
//
// The library is silent unless Logger is set or the environment has DEBUG=analytics, which
// logs to standard error. Log lines never hold the write key or message contents.
//
// See docs/client.md for the whole guide and docs/benchmarks.md for the cost of a call.
package analytics
