package serve

import (
	"context"
	"errors"
	"io"
	"net/http"
	"os"
	"strconv"
	"time"

	"github.com/mirrorfleet/mirrorfleet/shared/serve/packcache"
)

// answer serves an upload-pack request. A clone (no haves) is answered from the pack
// cache's whole-response entry when there is one; while another request fills it, it
// waits (at most as long as its own request lasts) and is answered from it; otherwise
// git answers into the entry at disk speed and this client reads it at its own pace. Any
// other request, or a cache that cannot be used, goes to git as it is.
func (h *Handler) answer(w *recorder, r *http.Request, dir string, req request, proto string, body []byte) {
	c := h.cfg.PackCache
	keyed, clone := cloneRequest(proto, body)
	if req.svc != svcUploadPack || h.hook == "" || !clone {
		h.uploadPack(w, r, dir, req, proto, body, nil)
		return
	}
	key, err := packcache.ResponseKey(dir, proto, keyed)
	if err != nil {
		h.cfg.Log.Warn("serve: pack cache bypassed", "reason", err)
		h.uploadPack(w, r, dir, req, proto, body, nil)
		return
	}
	waited := false
	for range 3 {
		if f, size, ok := c.Open(key); ok {
			defer f.Close()
			h.sendCached(w, f, size, waited)
			return
		}
		if c.Uncacheable(key) {
			break
		}
		fill, err := c.Claim(key)
		if errors.Is(err, packcache.ErrBusy) {
			waited = true
			// At most the queue wait: a generation runs at disk speed, and one that
			// takes longer is not worth more of this request's time than a place in
			// the queue; past it, git answers this request itself.
			wctx, cancel := context.WithTimeout(r.Context(), h.cfg.QueueWait)
			err := c.Wait(wctx, key)
			cancel()
			if err != nil {
				break
			}
			continue
		}
		if err != nil {
			h.cfg.Log.Warn("serve: pack cache bypassed", "reason", err)
			break
		}
		h.uploadPack(w, r, dir, req, proto, body, fill)
		return
	}
	h.uploadPack(w, r, dir, req, proto, body, nil)
}

// sendCached writes a cached response: one copy from the file to the socket (sendfile
// where the connection allows), a slice at a time so a client that stops reading is
// cut after IdleTimeout as with git's own output.
func (h *Handler) sendCached(w *recorder, f *os.File, size int64, waited bool) {
	setResultHeaders(w.Header())
	w.Header().Set("Content-Length", strconv.FormatInt(size, 10))
	w.WriteHeader(http.StatusOK)
	rc := http.NewResponseController(w)
	const slice = 8 << 20
	var sent int64
	for sent < size {
		_ = rc.SetWriteDeadline(time.Now().Add(h.cfg.IdleTimeout))
		n, err := io.CopyN(w, f, min(slice, size-sent))
		sent += n
		if err != nil {
			break // the client went away; the entry stays for the next one
		}
	}
	res := packcache.Hit
	if waited {
		res = packcache.Waited
	}
	h.recordCache(packcache.Report{Result: res, Bytes: sent})
}
