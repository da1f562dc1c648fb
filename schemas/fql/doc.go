// Package fql compiles and evaluates the Filter Query Language of destination filters
// (docs/routing.md#destination-filters), as Segment documents it: field paths (`event`,
// `properties.total`, `properties.product\ 1.price`), the comparisons `=`, `!=`, `<`, `<=`, `>`,
// `>=` and `in`, the boolean operators `!`, `and`, `or` with parentheses, the functions
// contains, match (globs), length, lowercase and typeof, and the literals null, true, false,
// numbers, strings ('single' or "double" quoted) and lists (['a', 'b']).
//
// Precedence, tightest first: `!`, the comparisons, `and`, `or`. A comparison of values of
// different types is false (`!=` is true), `<`, `<=`, `>`, `>=` compare numbers only, and a
// missing field is null. An expression matches a message when it evaluates to true; any other
// value (null, a string...) does not match. Evaluation never fails and never panics.
//
// Compile parses an expression once; Expr.Eval evaluates it on a message's raw JSON without
// allocating: field values are found by scanning the bytes (the top-level members are indexed
// once per Message and shared by every expression evaluated on it). An Expr is immutable and
// safe for concurrent use; a Message is used by one goroutine at a time.
//
// PathSet removes (drop properties) or keeps only (allow properties) field paths of a JSON
// object.
package fql
