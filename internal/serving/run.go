package serving

import (
	"context"
	"errors"
	"net"
	"net/http"
	"time"
)

// Run serves srv on ln until ctx ends, over TLS when srv.TLSConfig is set
// (it must hold a certificate); then it shuts srv down gracefully: no new
// requests, those in flight get shutdownTimeout to finish. It returns nil
// once shut down, or why serving stopped before.
func Run(ctx context.Context, srv *http.Server, ln net.Listener, shutdownTimeout time.Duration) error {
	served := make(chan error, 1)
	go func() {
		if srv.TLSConfig != nil {
			served <- srv.ServeTLS(ln, "", "")
		} else {
			served <- srv.Serve(ln)
		}
	}()
	select {
	case err := <-served:
		return err
	case <-ctx.Done():
	}
	shutdownCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), shutdownTimeout)
	defer cancel()
	err := srv.Shutdown(shutdownCtx)
	if serr := <-served; serr != nil && !errors.Is(serr, http.ErrServerClosed) {
		err = errors.Join(err, serr)
	}
	return err
}
