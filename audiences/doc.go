// Package audiences will keep user profiles, evaluate audience rules and emit identify messages
// when membership changes.
package audiences
