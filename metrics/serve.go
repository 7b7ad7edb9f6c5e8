package metrics

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Path is where the metrics are served.
const Path = "/metrics"

// Handler serves c's metrics, and the serving process's own (Go runtime,
// process: its memory, CPU, open files), in Prometheus's text format or
// whichever format the scraper asks for.
func Handler(c *Collector) http.Handler {
	reg := prometheus.NewRegistry()
	reg.MustRegister(c, collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return handlerFor(reg, c.logf)
}

func handlerFor(g prometheus.Gatherer, logf func(string, ...any)) http.Handler {
	return promhttp.HandlerFor(g, promhttp.HandlerOpts{
		ErrorLog:      logger(logf),
		ErrorHandling: promhttp.ContinueOnError,
		// Scrapes read systemd; two at once is plenty for a loopback port.
		MaxRequestsInFlight: 2,
	})
}

type logger func(string, ...any)

func (l logger) Println(v ...any) { l("metrics: %s", fmt.Sprint(v...)) }

var _ promhttp.Logger = logger(nil)

// Server serves Path on one address.
type Server struct {
	srv  *http.Server
	addr net.Addr
	done chan error
}

// Addr is the address bound.
func (s *Server) Addr() net.Addr { return s.addr }

// Listen binds addr (host:port) now, so a taken port is an error at
// start, and serves h on Path there until Close.
func Listen(addr string, h http.Handler) (*Server, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("listening for %s on %s: %w (choose another bus.metrics in the spec, or off)", Path, addr, err)
	}
	mux := http.NewServeMux()
	mux.Handle(Path, h)
	s := &Server{srv: &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}, addr: ln.Addr(), done: make(chan error, 1)}
	go func() { s.done <- s.srv.Serve(ln) }()
	return s, nil
}

// Close stops serving, letting a scrape under way finish for a moment.
func (s *Server) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	err := s.srv.Shutdown(ctx)
	if serr := <-s.done; !errors.Is(serr, http.ErrServerClosed) {
		err = errors.Join(err, serr)
	}
	return err
}
