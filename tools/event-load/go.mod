// The scale benchmark's load generator (harness/bench/scale.py): the Go standard library
// only, so it builds offline with any Go >= 1.25 (harness/versions.py GO_MIN_VERSION).
module github.com/watcher-harness/tools/event-load

go 1.25
