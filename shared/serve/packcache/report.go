package packcache

import (
	"context"
	"encoding/json"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"time"
)

// sendReport sends rep to the server's report socket, if there is one. Best effort:
// a server that is gone or busy loses a figure, never a clone.
func sendReport(socket string, rep Report) {
	if socket == "" {
		return
	}
	c, err := net.DialTimeout("unixgram", socket, time.Second)
	if err != nil {
		return
	}
	defer c.Close()
	_ = c.SetWriteDeadline(time.Now().Add(time.Second))
	b, _ := json.Marshal(rep)
	_, _ = c.Write(b)
}

// Listener receives the reports of the hooks a server's upload-packs run.
type Listener struct {
	Path string // the socket, for EnvReport
	conn *net.UnixConn
	dir  string
}

// Listen opens a report socket in a new directory under dir ("" for the system's
// temporary directory; a socket path must stay short) and calls on with each report
// until Close.
func Listen(dir string, on func(Report), log *slog.Logger) (*Listener, error) {
	d, err := os.MkdirTemp(dir, "mf-hook-")
	if err != nil {
		return nil, err
	}
	l := &Listener{Path: filepath.Join(d, "report.sock"), dir: d}
	l.conn, err = net.ListenUnixgram("unixgram", &net.UnixAddr{Name: l.Path, Net: "unixgram"})
	if err != nil {
		os.RemoveAll(d)
		return nil, err
	}
	go func() {
		buf := make([]byte, 4096)
		for {
			n, err := l.conn.Read(buf)
			if err != nil {
				return // closed
			}
			var rep Report
			if err := json.Unmarshal(buf[:n], &rep); err != nil {
				log.Log(context.Background(), slog.LevelDebug, "pack cache: bad report", "err", err)
				continue
			}
			on(rep)
		}
	}()
	return l, nil
}

// Close stops listening and removes the socket.
func (l *Listener) Close() error {
	err := l.conn.Close()
	os.RemoveAll(l.dir)
	return err
}
