package authn

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Certificates are rotated on disk (cert-manager, Vault, SPIFFE agents
// rewrite them every few hours or days); a long-running sluice must pick
// the new ones up without a restart. A key pair or CA file is therefore
// loaded once at start (a bad file fails start-up and `sluice validate`)
// and looked at again at most every TLSReloadCheck, on a handshake: when
// a file's size or modification time changed, it is read again. A read
// that fails (a certificate written before its key, a half-written file)
// keeps the files that worked, is logged once for those file states and
// counted in sluice_tls_reloads_total{result="failed"}; the next check
// tries again.

// TLSReloadCheck is how often a handshake may look at the files.
var TLSReloadCheck = time.Second

// TLSReloads counts reloads of TLS files by result ("reloaded",
// "failed"). It is one collector for the process: RegisterTLSMetrics
// adds it to a registry.
var TLSReloads = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "sluice_tls_reloads_total",
	Help: "TLS certificate, key and CA files read again after they changed on disk, by result (reloaded, failed: the files in use are kept)."},
	[]string{"result"})

// RegisterTLSMetrics registers TLSReloads with reg; registering it again
// with the same registry is not an error.
func RegisterTLSMetrics(reg prometheus.Registerer) {
	if reg == nil {
		return
	}
	if err := reg.Register(TLSReloads); err != nil {
		var are prometheus.AlreadyRegisteredError
		if !errors.As(err, &are) {
			panic(err)
		}
	}
}

// ErrNoCertificate is LoadCAPool's error for a file without a PEM
// certificate.
var ErrNoCertificate = errors.New("holds no PEM certificate")

// LoadCAPool reads PEM CA certificates from path. Its errors name the
// file.
func LoadCAPool(path string) (*x509.CertPool, error) {
	pem, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("%q %w", path, ErrNoCertificate)
	}
	return pool, nil
}

// stamp is what a check compares: a file's size and modification time.
type stamp struct {
	size  int64
	mtime time.Time
}

func stampOf(path string) stamp {
	fi, err := os.Stat(path)
	if err != nil {
		return stamp{size: -1}
	}
	return stamp{fi.Size(), fi.ModTime()}
}

// watched holds the last good value loaded from a set of files and
// reloads it when any of them changes.
type watched[T any] struct {
	paths []string
	load  func() (T, error)
	what  string // for the log: "key pair", "client CA"

	cur     atomic.Pointer[T]
	next    atomic.Int64 // unix nanoseconds of the next check
	mu      sync.Mutex   // one check at a time
	stamps  []stamp      // of the files cur was loaded from
	refused []stamp      // of the files the last failed load read
}

func newWatched[T any](what string, load func() (T, error), paths ...string) (*watched[T], error) {
	w := &watched[T]{paths: paths, load: load, what: what}
	w.stamps = w.stampAll()
	v, err := load()
	if err != nil {
		return nil, err
	}
	w.cur.Store(&v)
	w.next.Store(time.Now().Add(TLSReloadCheck).UnixNano())
	return w, nil
}

func (w *watched[T]) stampAll() []stamp {
	s := make([]stamp, len(w.paths))
	for i, p := range w.paths {
		s[i] = stampOf(p)
	}
	return s
}

func sameStamps(a, b []stamp) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i].size != b[i].size || !a[i].mtime.Equal(b[i].mtime) {
			return false
		}
	}
	return true
}

// get returns the current value, first reloading it if a check is due
// and a file changed. It reports whether the value changed.
func (w *watched[T]) get() (*T, bool) {
	now := time.Now().UnixNano()
	if now < w.next.Load() || !w.mu.TryLock() {
		return w.cur.Load(), false
	}
	defer w.mu.Unlock()
	w.next.Store(now + int64(TLSReloadCheck))
	st := w.stampAll()
	if sameStamps(st, w.stamps) || sameStamps(st, w.refused) {
		return w.cur.Load(), false
	}
	v, err := w.load()
	if err != nil {
		w.refused = st
		TLSReloads.WithLabelValues("failed").Inc()
		slog.Default().Warn("tls: files changed but do not load; still using the ones loaded before", "what", w.what, "files", w.paths, "err", err)
		return w.cur.Load(), false
	}
	w.stamps, w.refused = st, nil
	w.cur.Store(&v)
	TLSReloads.WithLabelValues("reloaded").Inc()
	slog.Default().Info("tls: files reloaded", "what", w.what, "files", w.paths)
	return &v, true
}

// keyPair watches a certificate and its key.
func keyPair(certFile, keyFile string) (*watched[tls.Certificate], error) {
	return newWatched("key pair", func() (tls.Certificate, error) {
		return tls.LoadX509KeyPair(certFile, keyFile)
	}, certFile, keyFile)
}

// caPool watches a CA file.
func caPool(file string) (*watched[*x509.CertPool], error) {
	return newWatched("CA", func() (*x509.CertPool, error) { return LoadCAPool(file) }, file)
}

// ClientCertificate loads a client certificate and its key for a
// tls.Config's GetClientCertificate, read again when the files change on
// disk (as ServerTLS's). Its error names the files.
func ClientCertificate(certFile, keyFile string) (func(*tls.CertificateRequestInfo) (*tls.Certificate, error), error) {
	kp, err := keyPair(certFile, keyFile)
	if err != nil {
		return nil, fmt.Errorf("cert_file %q, key_file %q: %w", certFile, keyFile, err)
	}
	return func(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
		c, _ := kp.get()
		return c, nil
	}, nil
}
