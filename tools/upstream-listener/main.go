// Command upstream-listener runs the Kyma Runtime Watcher's own Go listener
// (github.com/kyma-project/runtime-watcher/listener) so the harness can put it behind
// the real gateway in place of ours: each event it hands over is printed on stdout as
// one JSON line, in the format of our `watcher-listener` (watcher/listener/cli.py,
// event_line), so the harness reads both the same way. Logs go to stderr as JSON.
// With --metrics-port, upstream's watcher_listener_* metrics (registered through the
// package's own metrics.Init, as an operator does with controller-runtime's registry)
// are served in the Prometheus text format on /metrics of that loopback port.
// SIGTERM and SIGINT end it with exit code 0.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strconv"
	"syscall"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/kyma-project/runtime-watcher/listener/pkg/metrics"
	"github.com/kyma-project/runtime-watcher/listener/pkg/v2/event"
	listenertypes "github.com/kyma-project/runtime-watcher/listener/pkg/v2/types"
)

type objectKey struct {
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
}

type gvk struct {
	Group   string `json:"group"`
	Version string `json:"version"`
	Kind    string `json:"kind"`
}

// line is one stdout event; the field order is that of event_line.
type line struct {
	RuntimeID  string    `json:"runtime_id"`
	Watched    objectKey `json:"watched"`
	WatchedGVK gvk       `json:"watched_gvk"`
	ReceivedAt float64   `json:"received_at"`
}

func main() {
	host := flag.String("host", "127.0.0.1", "address to listen on")
	port := flag.Int("port", 8082, "port to listen on")
	component := flag.String("component", "", "manager name in /v2/<name>/event")
	metricsPort := flag.Int("metrics-port", 0, "serve /metrics on this port of --host (0: off)")
	flag.Parse()
	if *component == "" {
		fmt.Fprintln(os.Stderr, "upstream-listener: error: --component is required")
		os.Exit(2)
	}

	logger := logr.FromSlogHandler(exitOnFailedBind{slog.NewJSONHandler(os.Stderr, nil)})
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()

	if *metricsPort != 0 {
		serveMetrics(ctx, logger, net.JoinHostPort(*host, strconv.Itoa(*metricsPort)))
	}

	listener := event.NewSKREventListener(net.JoinHostPort(*host, strconv.Itoa(*port)), *component)
	listener.Logger = logger
	go func() {
		// Start serves until ctx ends; upstream only logs a failed bind, which
		// exitOnFailedBind turns into an exit so the harness sees it at once.
		if err := listener.Start(ctx); err != nil && ctx.Err() == nil {
			logger.Error(err, "listener stopped")
			os.Exit(1)
		}
	}()

	out := json.NewEncoder(os.Stdout) // os.Stdout is unbuffered: one write per line
	out.SetEscapeHTML(false)
	for {
		select {
		case <-ctx.Done():
			return
		case received := <-listener.ReceivedEvents():
			if err := out.Encode(toLine(received, time.Now())); err != nil {
				logger.Error(err, "writing the event to stdout failed")
				os.Exit(1)
			}
		}
	}
}

// toLine reads the content upstream's listener puts into the event object
// (event.UnstructuredContent): watched, watched-gvk, runtime-id.
func toLine(received listenertypes.GenericEvent, at time.Time) line {
	content := received.Object.UnstructuredContent()
	watched, _ := content["watched"].(types.NamespacedName)
	kind, _ := content["watched-gvk"].(metav1.GroupVersionKind)
	runtimeID, _ := content["runtime-id"].(string)
	return line{
		RuntimeID:  runtimeID,
		Watched:    objectKey{Namespace: watched.Namespace, Name: watched.Name},
		WatchedGVK: gvk{Group: kind.Group, Version: kind.Version, Kind: kind.Kind},
		ReceivedAt: float64(at.UnixNano()) / 1e9,
	}
}

// serveMetrics registers upstream's listener metrics in a registry of their own and
// serves it until ctx ends; a failed bind ends the program (the harness picked the port).
func serveMetrics(ctx context.Context, logger logr.Logger, addr string) {
	registry := prometheus.NewRegistry()
	metrics.Init(registry)
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(registry, promhttp.HandlerOpts{}))
	server := &http.Server{Addr: addr, Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() {
		if err := server.ListenAndServe(); err != nil && !errors.Is(err, http.ErrServerClosed) {
			logger.Error(err, "metrics server failed", "addr", addr)
			os.Exit(1)
		}
	}()
	go func() {
		<-ctx.Done()
		_ = server.Close()
	}()
}

// exitOnFailedBind ends the program after upstream logs "Webserver startup failed":
// upstream's Start only logs a failed ListenAndServe and keeps waiting, so without this a
// taken port would leave a process that serves nothing.
type exitOnFailedBind struct{ slog.Handler }

func (h exitOnFailedBind) Handle(ctx context.Context, record slog.Record) error {
	err := h.Handler.Handle(ctx, record)
	if record.Level >= slog.LevelError && record.Message == "Webserver startup failed" {
		os.Exit(1)
	}
	return err
}

func (h exitOnFailedBind) WithAttrs(attrs []slog.Attr) slog.Handler {
	return exitOnFailedBind{h.Handler.WithAttrs(attrs)}
}

func (h exitOnFailedBind) WithGroup(name string) slog.Handler {
	return exitOnFailedBind{h.Handler.WithGroup(name)}
}
