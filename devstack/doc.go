// Package devstack runs the whole of Tributary in one process for development (make run):
// the embedded broker, ingest, router, deliverer, audiences and console. Its tests are the
// end-to-end tests of that stack, and the repository-wide checks of its text: the settings
// table of docs/configuration.md is generated from the settings structs
// (TestConfigDocUpToDate), and every document and heading anchor that a doc, comment, doc
// tag or manifest cites exists (TestDocLinks). They leave no goroutine behind (goleak).
package devstack
