// Command event-load sends one request body as HTTPS POSTs to one URL on behalf of many
// simulated SKRs, each with its own client certificate, and prints one JSON line with what
// it measured. It is the load generator of the scale benchmark (harness/bench/scale.py):
// a Go client costs a fraction of the CPU per event of a Python one, so on a machine it
// shares with Envoy and the listener the measured rate is theirs, not the generator's.
//
//	event-load -url https://127.0.0.1:8443/v2/lifecycle-manager/event \
//	    -identities ids.json -body event.json -count 12000 -in-flight 64 -budget 90s
//
// ids.json lists the identities: [{"cert": "a.crt", "key": "a.key", "ca": "ca.crt"}, ...]
// (PEM files: the client certificate, its key, the CA that verifies the server). Each
// identity has its own http.Client and tls.Config with keep-alive and at most
// -conns-per-identity connections (open and idle). Request i goes out as identity
// i mod n (round-robin), at most -in-flight at a time.
//
// Two phases: a warm-up of max(-warmup, n) requests, so that every identity has connected
// once, then the measured phase of -count requests. A phase ends when each of its requests
// has an answer or an error, or when its budget (-warmup-budget, -budget) has passed: then
// the requests still open are cancelled and not counted, and "complete" is false.
//
// Output, one JSON line on stdout: the settings (requested, identities, in_flight, procs);
// events (answered requests, any status), seconds, events_per_s, latency_ms {count, p50,
// p99, max} (POST until the answer's body was read; nearest rank, as
// harness/report/stats.percentile), statuses ({"200": n, ...}; "error" counts requests that
// got no answer, error_sample is the first such error), protocols, complete; cpu_s and
// cpu_ms_per_event (this process's user + system CPU during the measured phase,
// getrusage), cpu_of (the same for each -cpu-of NAME=PID process, from /proc/PID/stat at
// the same instants; null when unreadable) and warmup (the warm-up's figures). Bad input:
// a message on stderr and exit code 2; -cpuprofile FILE profiles the measured phase.
//
// By default Go code runs on one thread at a time (-procs 1, GOMAXPROCS): on a small machine
// shared with the servers it measures, a second thread mostly spins waiting for work and
// wakes the first, which costs CPU those servers would use (about 0.07 instead of 0.11 ms
// of CPU per event through Envoy on 2 cores).
package main

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"net/url"
	"os"
	"runtime"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

const (
	maxCount        = 10_000_000
	maxInFlight     = 10_000
	maxIdentities   = 100_000
	maxConnsPer     = 1_000
	maxBudget       = time.Hour
	maxBodyBytes    = 16 << 20
	maxAnswerBytes  = 1 << 20 // read (and discard) at most this much of an answer's body
	clockTicksPerS  = 100     // USER_HZ, the unit of /proc/PID/stat times on Linux
	exitBadInput    = 2
	exitRuntimeFail = 1
)

// identity is one entry of the -identities file.
type identity struct {
	Cert string `json:"cert"`
	Key  string `json:"key"`
	CA   string `json:"ca"`
}

type config struct {
	url            string
	identities     []identity
	body           []byte
	contentType    string
	count          int
	warmup         int
	inFlight       int
	connsPer       int
	budget         time.Duration
	warmupBudget   time.Duration
	requestTimeout time.Duration
	cpuOf          map[string]int
	cpuProfile     string
	procs          int
}

// pidFlags collects repeated -cpu-of NAME=PID flags.
type pidFlags map[string]int

func (p pidFlags) String() string { return fmt.Sprint(map[string]int(p)) }

func (p pidFlags) Set(value string) error {
	name, pid, ok := strings.Cut(value, "=")
	n, err := strconv.Atoi(pid)
	if !ok || name == "" || err != nil || n <= 0 {
		return fmt.Errorf("want NAME=PID with a positive PID, got %q", value)
	}
	if _, seen := p[name]; seen {
		return fmt.Errorf("name %q given twice", name)
	}
	p[name] = n
	return nil
}

// parseConfig reads and checks the command line and the files it names.
func parseConfig(args []string, stderr io.Writer) (*config, error) {
	fs := flag.NewFlagSet("event-load", flag.ContinueOnError)
	fs.SetOutput(stderr)
	rawURL := fs.String("url", "", "https URL to POST to (required)")
	identities := fs.String("identities", "", `JSON file: [{"cert": PATH, "key": PATH, "ca": PATH}, ...] (required)`)
	body := fs.String("body", "", "file whose bytes are each request's body (required)")
	contentType := fs.String("content-type", "application/json", "Content-Type of each request")
	count := fs.Int("count", 0, fmt.Sprintf("requests in the measured phase, 1..%d (required)", maxCount))
	warmup := fs.Int("warmup", 200, "requests in the warm-up phase (at least one per identity)")
	inFlight := fs.Int("in-flight", 64, fmt.Sprintf("requests open at a time, 1..%d", maxInFlight))
	connsPer := fs.Int("conns-per-identity", 4, "connections (open and idle) per identity")
	budget := fs.Duration("budget", 90*time.Second, "time limit of the measured phase")
	warmupBudget := fs.Duration("warmup-budget", 120*time.Second, "time limit of the warm-up")
	requestTimeout := fs.Duration("request-timeout", 30*time.Second, "time limit of one request")
	cpuOf := pidFlags{}
	procs := fs.Int("procs", 1, "OS threads running Go code at once (GOMAXPROCS): 1 leaves the other cores to what is measured and spares cross-thread wake-ups")
	cpuProfile := fs.String("cpuprofile", "", "write a CPU profile of the measured phase to this file (go tool pprof)")
	fs.Var(cpuOf, "cpu-of", "NAME=PID: also report that process's CPU seconds in the measured phase (repeatable)")
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), "usage: event-load -url URL -identities FILE -body FILE -count N [flags]")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("unexpected arguments: %q", fs.Args())
	}
	cfg := &config{
		contentType:    *contentType,
		count:          *count,
		warmup:         *warmup,
		inFlight:       *inFlight,
		connsPer:       *connsPer,
		budget:         *budget,
		warmupBudget:   *warmupBudget,
		requestTimeout: *requestTimeout,
		cpuOf:          cpuOf,
		cpuProfile:     *cpuProfile,
		procs:          *procs,
	}
	for _, check := range []struct {
		name      string
		value     int
		low, high int
	}{
		{"-count", *count, 1, maxCount},
		{"-warmup", *warmup, 0, maxCount},
		{"-in-flight", *inFlight, 1, maxInFlight},
		{"-conns-per-identity", *connsPer, 1, maxConnsPer},
		{"-procs", *procs, 1, 1024},
	} {
		if check.value < check.low || check.value > check.high {
			return nil, fmt.Errorf("%s must be in %d..%d, got %d", check.name, check.low, check.high, check.value)
		}
	}
	for _, check := range []struct {
		name  string
		value time.Duration
	}{{"-budget", *budget}, {"-warmup-budget", *warmupBudget}, {"-request-timeout", *requestTimeout}} {
		if check.value <= 0 || check.value > maxBudget {
			return nil, fmt.Errorf("%s must be positive and at most %s, got %s", check.name, maxBudget, check.value)
		}
	}
	u, err := url.Parse(*rawURL)
	switch {
	case *rawURL == "":
		return nil, errors.New("-url is required")
	case err != nil:
		return nil, fmt.Errorf("-url: %v", err)
	case u.Scheme != "https" || u.Host == "":
		return nil, fmt.Errorf("-url must be https://HOST[:PORT]/PATH, got %q", *rawURL)
	}
	cfg.url = u.String()
	if cfg.identities, err = readIdentities(*identities); err != nil {
		return nil, err
	}
	if cfg.body, err = readBody(*body); err != nil {
		return nil, err
	}
	return cfg, nil
}

func readIdentities(path string) ([]identity, error) {
	if path == "" {
		return nil, errors.New("-identities is required")
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("-identities: %v", err)
	}
	defer f.Close()
	decoder := json.NewDecoder(io.LimitReader(f, 64<<20))
	decoder.DisallowUnknownFields()
	var ids []identity
	if err := decoder.Decode(&ids); err != nil {
		return nil, fmt.Errorf("-identities %s: want a JSON list of {\"cert\", \"key\", \"ca\"}: %v", path, err)
	}
	if len(ids) == 0 || len(ids) > maxIdentities {
		return nil, fmt.Errorf("-identities %s: want 1..%d identities, got %d", path, maxIdentities, len(ids))
	}
	for i, id := range ids {
		if id.Cert == "" || id.Key == "" || id.CA == "" {
			return nil, fmt.Errorf("-identities %s: entry %d needs cert, key and ca", path, i)
		}
	}
	return ids, nil
}

func readBody(path string) ([]byte, error) {
	if path == "" {
		return nil, errors.New("-body is required")
	}
	info, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("-body: %v", err)
	}
	if !info.Mode().IsRegular() || info.Size() == 0 || info.Size() > maxBodyBytes {
		return nil, fmt.Errorf("-body %s: want a non-empty regular file of at most %d bytes", path, maxBodyBytes)
	}
	return os.ReadFile(path)
}

// newClients builds one client per identity; each CA file is read once.
func newClients(cfg *config) ([]*http.Client, error) {
	pools := map[string]*x509.CertPool{}
	clients := make([]*http.Client, 0, len(cfg.identities))
	for i, id := range cfg.identities {
		cert, err := tls.LoadX509KeyPair(id.Cert, id.Key)
		if err != nil {
			return nil, fmt.Errorf("identity %d (%s): %v", i, id.Cert, err)
		}
		pool, ok := pools[id.CA]
		if !ok {
			pem, err := os.ReadFile(id.CA)
			if err != nil {
				return nil, fmt.Errorf("identity %d: ca: %v", i, err)
			}
			pool = x509.NewCertPool()
			if !pool.AppendCertsFromPEM(pem) {
				return nil, fmt.Errorf("identity %d: ca %s holds no PEM certificate", i, id.CA)
			}
			pools[id.CA] = pool
		}
		dialer := &net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second}
		transport := &http.Transport{
			// No Proxy: the environment's proxy settings must not reroute a benchmark.
			DialContext: dialer.DialContext,
			TLSClientConfig: &tls.Config{
				Certificates: []tls.Certificate{cert},
				RootCAs:      pool,
				MinVersion:   tls.VersionTLS12,
			},
			TLSHandshakeTimeout: 10 * time.Second,
			MaxConnsPerHost:     cfg.connsPer,
			MaxIdleConnsPerHost: cfg.connsPer,
			IdleConnTimeout:     90 * time.Second,
			DisableCompression:  true,
		}
		clients = append(clients, &http.Client{Transport: transport, Timeout: cfg.requestTimeout})
	}
	return clients, nil
}

// latencySummary is harness.bench.model.summary: {"count": 0} when there is nothing.
type latencySummary struct {
	Count int      `json:"count"`
	P50   *float64 `json:"p50,omitempty"`
	P99   *float64 `json:"p99,omitempty"`
	Max   *float64 `json:"max,omitempty"`
}

// percentile is the nearest-rank q-th percentile (0 < q <= 100) of sorted, non-empty
// values: harness/report/stats.percentile, an observed sample.
func percentile(sorted []float64, q float64) float64 {
	rank := int(math.Ceil(q / 100 * float64(len(sorted))))
	return sorted[max(rank, 1)-1]
}

func round(x float64, digits int) float64 {
	scale := math.Pow(10, float64(digits))
	return math.Round(x*scale) / scale
}

func summarize(values []float64) latencySummary {
	if len(values) == 0 {
		return latencySummary{}
	}
	sorted := slices.Clone(values)
	slices.Sort(sorted)
	p50, p99, top := round(percentile(sorted, 50), 3), round(percentile(sorted, 99), 3), round(sorted[len(sorted)-1], 3)
	return latencySummary{Count: len(sorted), P50: &p50, P99: &p99, Max: &top}
}

type phaseReport struct {
	Events      int            `json:"events"`
	Seconds     float64        `json:"seconds"`
	EventsPerS  float64        `json:"events_per_s"`
	LatencyMS   latencySummary `json:"latency_ms"`
	Statuses    map[string]int `json:"statuses"`
	Protocols   map[string]int `json:"protocols"`
	Complete    bool           `json:"complete"`
	ErrorSample string         `json:"error_sample,omitempty"`
}

type report struct {
	phaseReport
	Requested     int                 `json:"requested"`
	Identities    int                 `json:"identities"`
	InFlight      int                 `json:"in_flight"`
	Procs         int                 `json:"procs"`
	CPUSeconds    float64             `json:"cpu_s"`
	CPUMsPerEvent float64             `json:"cpu_ms_per_event"`
	CPUOf         map[string]*float64 `json:"cpu_of"`
	Warmup        phaseReport         `json:"warmup"`
}

// tally is what one worker saw.
type tally struct {
	latencies   []float64
	statuses    map[string]int
	protocols   map[string]int
	errorSample string
}

func post(ctx context.Context, client *http.Client, cfg *config) (int, string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, cfg.url, bytes.NewReader(cfg.body))
	if err != nil {
		return 0, "", err
	}
	req.Header.Set("Content-Type", cfg.contentType)
	resp, err := client.Do(req)
	if err != nil {
		return 0, "", err
	}
	_, err = io.Copy(io.Discard, io.LimitReader(resp.Body, maxAnswerBytes))
	if closeErr := resp.Body.Close(); err == nil {
		err = closeErr
	}
	if err != nil {
		return 0, "", err
	}
	return resp.StatusCode, resp.Proto, nil
}

// runPhase sends total requests round-robin over clients, at most cfg.inFlight at a time,
// until all are done or budget has passed.
func runPhase(clients []*http.Client, cfg *config, total int, budget time.Duration) phaseReport {
	ctx, cancel := context.WithTimeout(context.Background(), budget)
	defer cancel()
	var next atomic.Int64
	workers := max(min(cfg.inFlight, total), 1)
	tallies := make([]tally, workers)
	var wg sync.WaitGroup
	started := time.Now()
	for w := range tallies {
		t := &tallies[w]
		t.statuses, t.protocols = map[string]int{}, map[string]int{}
		wg.Go(func() {
			for {
				i := int(next.Add(1) - 1)
				if i >= total || ctx.Err() != nil {
					return
				}
				sent := time.Now()
				status, proto, err := post(ctx, clients[i%len(clients)], cfg)
				if err != nil {
					if ctx.Err() != nil {
						return // cut off by the budget: not counted
					}
					t.statuses["error"]++
					if t.errorSample == "" {
						t.errorSample = err.Error()
					}
					continue
				}
				t.latencies = append(t.latencies, float64(time.Since(sent))/float64(time.Millisecond))
				t.statuses[strconv.Itoa(status)]++
				t.protocols[proto]++
			}
		})
	}
	wg.Wait()
	seconds := time.Since(started).Seconds()
	out := phaseReport{Statuses: map[string]int{}, Protocols: map[string]int{}}
	var latencies []float64
	done := 0
	for _, t := range tallies {
		latencies = append(latencies, t.latencies...)
		for k, v := range t.statuses {
			out.Statuses[k] += v
			done += v
		}
		for k, v := range t.protocols {
			out.Protocols[k] += v
		}
		if out.ErrorSample == "" {
			out.ErrorSample = t.errorSample
		}
	}
	out.Events = len(latencies)
	out.Seconds = round(seconds, 3)
	out.EventsPerS = round(float64(out.Events)/max(seconds, 1e-9), 1)
	out.LatencyMS = summarize(latencies)
	out.Complete = done == total
	return out
}

// ownCPU is this process's user + system CPU seconds so far.
func ownCPU() (float64, error) {
	var usage syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &usage); err != nil {
		return 0, err
	}
	return float64(usage.Utime.Nano()+usage.Stime.Nano()) / 1e9, nil
}

// procCPU is /proc/PID/stat's utime + stime in seconds, as harness.bench.common.cpu_seconds.
func procCPU(pid int) (float64, bool) {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, false
	}
	end := bytes.LastIndexByte(raw, ')')
	if end < 0 || end+2 > len(raw) {
		return 0, false
	}
	// after the command: state(0) ppid pgrp session tty tpgid flags minflt cminflt majflt
	// cmajflt utime(11) stime(12)
	fields := strings.Fields(string(raw[end+2:]))
	if len(fields) < 13 {
		return 0, false
	}
	utime, err1 := strconv.ParseInt(fields[11], 10, 64)
	stime, err2 := strconv.ParseInt(fields[12], 10, 64)
	if err1 != nil || err2 != nil {
		return 0, false
	}
	return float64(utime+stime) / clockTicksPerS, true
}

func cpuOfAll(pids map[string]int) map[string]float64 {
	out := map[string]float64{}
	for name, pid := range pids {
		if seconds, ok := procCPU(pid); ok {
			out[name] = seconds
		}
	}
	return out
}

func run(cfg *config, clients []*http.Client) (report, error) {
	var profile *os.File
	if cfg.cpuProfile != "" {
		f, err := os.Create(cfg.cpuProfile)
		if err != nil {
			return report{}, fmt.Errorf("-cpuprofile: %v", err)
		}
		defer f.Close()
		profile = f
	}
	warmup := runPhase(clients, cfg, max(cfg.warmup, len(clients)), cfg.warmupBudget)
	others0 := cpuOfAll(cfg.cpuOf)
	own0, err := ownCPU()
	if err != nil {
		return report{}, fmt.Errorf("getrusage: %v", err)
	}
	if profile != nil {
		if err := pprof.StartCPUProfile(profile); err != nil {
			return report{}, fmt.Errorf("-cpuprofile: %v", err)
		}
	}
	measured := runPhase(clients, cfg, cfg.count, cfg.budget)
	pprof.StopCPUProfile() // no-op without -cpuprofile
	own1, err := ownCPU()
	if err != nil {
		return report{}, fmt.Errorf("getrusage: %v", err)
	}
	others1 := cpuOfAll(cfg.cpuOf)
	cpuOf := map[string]*float64{}
	for name := range cfg.cpuOf {
		before, ok0 := others0[name]
		after, ok1 := others1[name]
		cpuOf[name] = nil
		if ok0 && ok1 {
			delta := round(after-before, 3)
			cpuOf[name] = &delta
		}
	}
	for _, client := range clients {
		client.CloseIdleConnections()
	}
	return report{
		phaseReport:   measured,
		Requested:     cfg.count,
		Identities:    len(clients),
		InFlight:      cfg.inFlight,
		Procs:         cfg.procs,
		CPUSeconds:    round(own1-own0, 3),
		CPUMsPerEvent: round(1000*(own1-own0)/float64(max(measured.Events, 1)), 3),
		CPUOf:         cpuOf,
		Warmup:        warmup,
	}, nil
}

func main() {
	cfg, err := parseConfig(os.Args[1:], os.Stderr)
	if errors.Is(err, flag.ErrHelp) {
		os.Exit(0)
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "event-load: %v (see event-load -h)\n", err)
		os.Exit(exitBadInput)
	}
	runtime.GOMAXPROCS(cfg.procs)
	clients, err := newClients(cfg)
	if err != nil {
		fmt.Fprintf(os.Stderr, "event-load: -identities: %v\n", err)
		os.Exit(exitBadInput)
	}
	out, err := run(cfg, clients)
	if err != nil {
		fmt.Fprintf(os.Stderr, "event-load: %v\n", err)
		os.Exit(exitRuntimeFail)
	}
	line, err := json.Marshal(out)
	if err != nil {
		fmt.Fprintf(os.Stderr, "event-load: %v\n", err)
		os.Exit(exitRuntimeFail)
	}
	fmt.Println(string(line))
}
