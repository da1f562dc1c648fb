// Package devstack runs the whole of Tributary in one process for development (make run) and holds
// the end-to-end tests.
package devstack
