// Package egresstest holds test helpers for egress: an HTTP CONNECT proxy
// that records what it tunnelled, and a TLS server answering for a public
// host name (files.slack.com, api.telegram.org) with a certificate a test
// trusts. It is imported by tests only.
package egresstest

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"io"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"
)

// Proxy is an HTTP CONNECT proxy. A CONNECT to a host:port in its routes
// is tunnelled to the address the route names (the test's stand-in for
// that host, as a proxy resolving the name would reach the real one); any
// other target gets 502, and every other method 405. It records each
// CONNECT target, routed or not.
type Proxy struct {
	URL    string // http://127.0.0.1:port, for HTTPS_PROXY
	mu     sync.Mutex
	routes map[string]string
	seen   []string
}

// NewProxy starts a proxy with routes (target host:port → dial address),
// closed when the test ends.
func NewProxy(t testing.TB, routes map[string]string) *Proxy {
	t.Helper()
	p := &Proxy{routes: routes}
	srv := httptest.NewServer(http.HandlerFunc(p.serve))
	t.Cleanup(srv.Close)
	p.URL = srv.URL
	return p
}

// Tunnels lists the CONNECT targets asked for, in order.
func (p *Proxy) Tunnels() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.seen...)
}

func (p *Proxy) serve(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodConnect {
		http.Error(w, "CONNECT only", http.StatusMethodNotAllowed)
		return
	}
	p.mu.Lock()
	p.seen = append(p.seen, r.Host)
	to, ok := p.routes[r.Host]
	p.mu.Unlock()
	if !ok {
		http.Error(w, "no route to "+r.Host, http.StatusBadGateway)
		return
	}
	up, err := net.DialTimeout("tcp", to, 5*time.Second)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	hj, ok := w.(http.Hijacker)
	if !ok {
		up.Close()
		http.Error(w, "no hijack", http.StatusInternalServerError)
		return
	}
	w.WriteHeader(http.StatusOK)
	down, buf, err := hj.Hijack()
	if err != nil {
		up.Close()
		return
	}
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { // client → upstream, starting with what was buffered
		defer wg.Done()
		_, _ = io.Copy(up, buf)
		if c, ok := up.(*net.TCPConn); ok {
			_ = c.CloseWrite()
		}
	}()
	go func() {
		defer wg.Done()
		_, _ = io.Copy(down, up)
		_ = down.Close()
	}()
	wg.Wait()
	up.Close()
}

// NewTLSServer starts an HTTPS server for h whose certificate names hosts,
// and returns it with a pool that trusts that certificate (for
// egress.TLSForTests or an http.Transport's RootCAs).
func NewTLSServer(t testing.TB, h http.Handler, hosts ...string) (*httptest.Server, *x509.CertPool) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: hosts[0]},
		DNSNames:              hosts,
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(time.Hour),
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(cert)
	srv := httptest.NewUnstartedServer(h)
	srv.TLS = &tls.Config{Certificates: []tls.Certificate{{Certificate: [][]byte{der}, PrivateKey: key, Leaf: cert}}}
	srv.StartTLS()
	t.Cleanup(srv.Close)
	return srv, pool
}
