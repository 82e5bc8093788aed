package main

import (
	"io"
	"os"
	"strings"
	"testing"
)

// The expectations are harness/report/stats.percentile's answers for the same samples.
func TestPercentileIsNearestRank(t *testing.T) {
	for _, c := range []struct {
		values []float64
		q      float64
		want   float64
	}{
		{[]float64{7}, 50, 7},
		{[]float64{7}, 99, 7},
		{[]float64{1, 2}, 50, 1},
		{[]float64{1, 2, 3, 4}, 50, 2},
		{[]float64{1, 2, 3, 4, 5}, 50, 3},
		{[]float64{1, 2, 3, 4, 5}, 99, 5},
		{seq(100), 99, 99},
		{seq(100), 50, 50},
		{seq(1000), 99, 990},
		{seq(12000), 99, 11880},
	} {
		if got := percentile(c.values, c.q); got != c.want {
			t.Errorf("percentile(%d values, %g) = %g, want %g", len(c.values), c.q, got, c.want)
		}
	}
}

func seq(n int) []float64 {
	out := make([]float64, n)
	for i := range out {
		out[i] = float64(i + 1)
	}
	return out
}

func TestSummaryOfNothingIsACountOfZero(t *testing.T) {
	if s := summarize(nil); s.Count != 0 || s.P50 != nil || s.P99 != nil || s.Max != nil {
		t.Errorf("summarize(nil) = %+v", s)
	}
	s := summarize([]float64{3.14159, 1, 2})
	if s.Count != 3 || *s.P50 != 2 || *s.P99 != 3.142 || *s.Max != 3.142 {
		t.Errorf("summarize = %d %g %g %g", s.Count, *s.P50, *s.P99, *s.Max)
	}
}

func TestBadInputIsNamed(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"-count", "0"}, "-count must be in 1..10000000"},
		{[]string{"-count", "1", "-in-flight", "0"}, "-in-flight must be in"},
		{[]string{"-count", "1", "-budget", "0s"}, "-budget must be positive"},
		{[]string{"-count", "1", "-procs", "0"}, "-procs must be in 1..1024"},
		{[]string{"-count", "1"}, "-url is required"},
		{[]string{"-count", "1", "-url", "http://x/"}, "-url must be https"},
		{[]string{"-count", "1", "-url", "https://x/"}, "-identities is required"},
		{[]string{"-count", "1", "-url", "https://x/", "-identities", "/nonexistent"}, "no such file"},
		{[]string{"-count", "1", "extra"}, "unexpected arguments"},
		{[]string{"-cpu-of", "envoy"}, "NAME=PID"},
	} {
		_, err := parseConfig(c.args, io.Discard)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("parseConfig(%q) = %v, want an error containing %q", c.args, err, c.want)
		}
	}
}

func TestProcCPUReadsThisProcess(t *testing.T) {
	if _, ok := procCPU(1 << 30); ok {
		t.Error("a pid that does not exist has a CPU time")
	}
	// /proc/self is not a pid; the test binary's own pid is.
	if _, ok := procCPU(os.Getpid()); !ok {
		t.Error("no CPU time for this process")
	}
}
