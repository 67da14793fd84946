//go:build integration

package localstack

import (
	"bufio"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"io"
	"log"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/registry"
)

// registryFront stands where ECR's registry would be. The emulators serve ECR's API but
// (moto) no registry behind the repository URI it returns, whose host does not resolve
// here. So the pushing process is given this as its HTTPS proxy: every CONNECT, to
// whatever host, is answered by a TLS server with a certificate for that host from a
// CA of the test's own (the process's SSL_CERT_FILE), in front of go-containerregistry's
// in-memory registry. The registry asks for the Basic credentials ECR's authorization
// token carries, as ECR does, and refuses anything else.
type registryFront struct {
	ProxyURL string // HTTPS_PROXY for the pushing process
	CAFile   string // its SSL_CERT_FILE
	Plain    string // the same registry over plain http on 127.0.0.1, for the test's reads

	ca     *x509.Certificate
	caKey  *ecdsa.PrivateKey
	inner  *http.Server
	conns  chan net.Conn
	mu     sync.Mutex
	hosts  []string // CONNECT targets
	certs  map[string]*tls.Certificate
	user   string
	secret string
}

func newRegistryFront(t *testing.T, user, password string) *registryFront {
	t.Helper()
	r := &registryFront{conns: make(chan net.Conn), certs: map[string]*tls.Certificate{}, user: user, secret: password}
	r.newCA(t)
	reg := registry.New(registry.Logger(log.New(io.Discard, "", 0)))
	r.inner = &http.Server{Handler: r.auth(reg), ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = r.inner.Serve(newChanListener(r.conns)) }()
	t.Cleanup(func() { _ = r.inner.Close() })

	proxy := httptest.NewServer(http.HandlerFunc(r.connect))
	t.Cleanup(proxy.Close)
	r.ProxyURL = proxy.URL
	plain := httptest.NewServer(reg)
	t.Cleanup(plain.Close)
	r.Plain = plain.Listener.Addr().String()
	return r
}

func (r *registryFront) newCA(t *testing.T) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "mirrorfleet integration CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour), IsCA: true,
		KeyUsage: x509.KeyUsageCertSign, BasicConstraintsValid: true}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	if r.ca, err = x509.ParseCertificate(der); err != nil {
		t.Fatal(err)
	}
	r.caKey = key
	r.CAFile = filepath.Join(t.TempDir(), "ca.pem")
	if err := os.WriteFile(r.CAFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o644); err != nil {
		t.Fatal(err)
	}
}

// cert is a leaf for host, signed by the CA.
func (r *registryFront) cert(host string) (*tls.Certificate, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if c, ok := r.certs[host]; ok {
		return c, nil
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(int64(len(r.certs) + 2)), Subject: pkix.Name{CommonName: host},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	if ip := net.ParseIP(host); ip != nil {
		tmpl.IPAddresses = []net.IP{ip}
	} else {
		tmpl.DNSNames = []string{host}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, r.ca, &key.PublicKey, r.caKey)
	if err != nil {
		return nil, err
	}
	c := &tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
	r.certs[host] = c
	return c, nil
}

// connect answers a CONNECT with the TLS-fronted registry.
func (r *registryFront) connect(w http.ResponseWriter, req *http.Request) {
	if req.Method != http.MethodConnect {
		http.Error(w, "only CONNECT", http.StatusMethodNotAllowed)
		return
	}
	host, _, err := net.SplitHostPort(req.Host)
	if err != nil {
		host = req.Host
	}
	r.mu.Lock()
	r.hosts = append(r.hosts, req.Host)
	r.mu.Unlock()
	conn, buf, err := http.NewResponseController(w).Hijack()
	if err != nil {
		return
	}
	if _, err := conn.Write([]byte("HTTP/1.1 200 Connection established\r\n\r\n")); err != nil {
		conn.Close()
		return
	}
	tc := tls.Server(bufferedConn{conn, buf.Reader}, &tls.Config{GetCertificate: func(*tls.ClientHelloInfo) (*tls.Certificate, error) {
		return r.cert(host)
	}})
	select {
	case r.conns <- tc:
	case <-req.Context().Done():
		conn.Close()
	}
}

// auth asks for ECR's Basic credentials.
func (r *registryFront) auth(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if u, p, ok := req.BasicAuth(); !ok || u != r.user || p != r.secret {
			w.Header().Set("WWW-Authenticate", `Basic realm="https://`+req.Host+`/",service="ecr.amazonaws.com"`)
			http.Error(w, `{"errors":[{"code":"DENIED","message":"Not Authorized"}]}`, http.StatusUnauthorized)
			return
		}
		next.ServeHTTP(w, req)
	})
}

// connected lists the hosts the proxy was asked to reach.
func (r *registryFront) connected() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.hosts)
}

// chanListener hands the proxied connections to the inner server.
type chanListener struct {
	c    chan net.Conn
	done chan struct{}
	once *sync.Once
}

func newChanListener(c chan net.Conn) chanListener {
	return chanListener{c: c, done: make(chan struct{}), once: &sync.Once{}}
}

func (l chanListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.c:
		return c, nil
	case <-l.done:
		return nil, net.ErrClosed
	}
}

func (l chanListener) Close() error {
	l.once.Do(func() { close(l.done) })
	return nil
}

func (l chanListener) Addr() net.Addr { return &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1)} }

// bufferedConn reads what the hijack had buffered first.
type bufferedConn struct {
	net.Conn
	r *bufio.Reader
}

func (b bufferedConn) Read(p []byte) (int, error) { return b.r.Read(p) }
