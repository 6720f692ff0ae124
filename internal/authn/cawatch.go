package authn

import "crypto/x509"

// WatchCA loads the PEM CA certificates of file for a client that verifies
// servers with them (an exporter's tls.ca_file), and returns a function
// giving the pool to verify the next handshake with: read again when the
// file changed on disk (checked at most every TLSReloadCheck, as the
// other watched files), the pool that worked kept when the new file does
// not load. changed reports a new pool since the previous call that
// reported one, so the caller rebuilds its TLS config only then. Its
// errors are LoadCAPool's.
func WatchCA(file string) (get func() (pool *x509.CertPool, changed bool), err error) {
	w, err := caPool(file)
	if err != nil {
		return nil, err
	}
	return func() (*x509.CertPool, bool) {
		p, changed := w.get()
		return *p, changed
	}, nil
}
