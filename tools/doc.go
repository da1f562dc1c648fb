// Package tools pins the developer tools (staticcheck) that make lint runs, as tool directives
// in this module's go.mod, so every machine runs the same versions.
package tools
