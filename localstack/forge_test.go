//go:build integration

package localstack

import (
	"encoding/pem"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
)

// forgeFake is a fake of GitLab's projects API (no emulator runs one): an HTTPS server
// that lists no project and records the PRIVATE-TOKEN each feed probe carried. CAFile
// is its certificate, for the workers' SSL_CERT_FILE.
type forgeFake struct {
	URL    string
	CAFile string

	mu     sync.Mutex
	tokens []string
}

func newForgeFake(t *testing.T) *forgeFake {
	t.Helper()
	f := &forgeFake{}
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/api/v4/projects" {
			http.NotFound(w, r)
			return
		}
		f.mu.Lock()
		f.tokens = append(f.tokens, r.Header.Get("PRIVATE-TOKEN"))
		f.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte("[]"))
	}))
	t.Cleanup(srv.Close)
	f.URL = srv.URL
	f.CAFile = filepath.Join(t.TempDir(), "forge-ca.pem")
	if err := os.WriteFile(f.CAFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw}), 0o644); err != nil {
		t.Fatal(err)
	}
	return f
}

// sawToken reports whether a probe carried tok.
func (f *forgeFake) sawToken(tok string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Contains(f.tokens, tok)
}

func (f *forgeFake) seen() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.tokens)
}
