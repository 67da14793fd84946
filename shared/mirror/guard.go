package mirror

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/mirrorfleet/mirrorfleet/shared/fetch"
)

// The guards below sit between the HTTP response body and go-git, and follow the
// stream exactly as go-git v5 will read it, so a limit is enforced before go-git acts
// on what it reads:
//
//   - GET info/refs (the ref advertisement): pkt-lines, each one ref (plus the
//     "# service=" line and flushes). go-git decodes the whole advertisement into
//     memory before returning, so its bytes and its refs are counted here.
//   - POST git-upload-pack: pkt-lines of ACK/NAK (the server response), then the
//     pack: either raw, or, with side-band(-64k), inside pkt-lines whose first payload
//     byte is the band (1 pack data, 2 progress, 3 error). go-git's packfile parser
//     reads the 12-byte header ("PACK", version, object count) and its index writer
//     (idxfile.Writer.OnHeader) at once allocates a slice for the declared count: a
//     header claiming 2^31-1 objects is a 16 GiB allocation. The guard reassembles the
//     header from whichever framing carries it and refuses the Read that completes it
//     when the count cannot fit the byte cap or exceeds the object cap, so go-git never
//     has all 12 bytes of such a header.
//   - The objects of the pack (walk.go): go-git resolves every object into memory once
//     the pack is in, sizing buffers from the sizes the pack declares; a small pack can
//     declare (or, compressed, hold) gigabytes. Each object's declared size, and each
//     delta's declared result size, is checked against MaxObjectBytes while the pack
//     streams in, long before go-git resolves anything.
//
// Where the guard and go-git could disagree on where the pack starts, the guard
// inspects more (any line whose first byte is a band, a raw "PACK" after any
// pkt-lines), never less; framing go-git would reject is refused here as well.

// pktMax is the largest pkt-line length go-git accepts (65520 plus the 4-byte length).
const pktMax = 65520 + 4

func limitErr(format string, args ...any) *fetch.Error {
	return &fetch.Error{Kind: fetch.KindLimit, Err: fmt.Errorf(format, args...)}
}

func malformed(format string, args ...any) *fetch.Error {
	return &fetch.Error{Kind: fetch.KindCorrupt, Err: fmt.Errorf("malformed response from upstream: "+format, args...)}
}

// hex4 decodes a pkt-line length.
func hex4(h [4]byte) (int, bool) {
	n := 0
	for _, c := range h {
		var v byte
		switch {
		case c >= '0' && c <= '9':
			v = c - '0'
		case c >= 'a' && c <= 'f':
			v = c - 'a' + 10
		case c >= 'A' && c <= 'F':
			v = c - 'A' + 10
		default:
			return 0, false
		}
		n = n<<4 | int(v)
	}
	return n, true
}

// pktFramer tracks pkt-line boundaries over a stream fed in arbitrary chunks.
type pktFramer struct {
	hdr  [4]byte
	nhdr int
	left int // payload bytes of the current line still to come
}

// header consumes header bytes from p; it returns the rest of p and, once four bytes
// are in, done with the header.
func (f *pktFramer) header(p []byte) ([]byte, bool) {
	c := copy(f.hdr[f.nhdr:], p)
	f.nhdr += c
	if f.nhdr < 4 {
		return nil, false
	}
	f.nhdr = 0
	return p[c:], true
}

// refAdvGuard bounds one ref advertisement: its bytes and its pkt-lines (refs).
type refAdvGuard struct {
	maxBytes int64
	maxRefs  int
	n        int64
	lines    int
	pkt      pktFramer
	broken   bool // not pkt-lines: go-git fails on it; only bytes are counted
}

// check takes the next chunk of the body; a non-nil error refuses it.
func (g *refAdvGuard) check(p []byte) *fetch.Error {
	g.n += int64(len(p))
	if g.maxBytes >= 0 && g.n > g.maxBytes {
		return limitErr("ref advertisement larger than %d bytes (limit MaxRefBytes)", g.maxBytes)
	}
	for len(p) > 0 && !g.broken {
		if g.pkt.left > 0 {
			c := min(g.pkt.left, len(p))
			g.pkt.left -= c
			p = p[c:]
			continue
		}
		var done bool
		if p, done = g.pkt.header(p); !done {
			break
		}
		n, ok := hex4(g.pkt.hdr)
		if !ok || (n > 0 && n <= 4) || n > pktMax {
			g.broken = true // a dumb server's text, say: go-git refuses it
			break
		}
		if n > 4 {
			g.lines++
			g.pkt.left = n - 4
		}
		// One line is "# service=git-upload-pack", and a few spare for servers that
		// send "version 1" or similar.
		if g.maxRefs >= 0 && g.lines > g.maxRefs+4 {
			return limitErr("ref advertisement has more than %d refs (limit MaxRefs)", g.maxRefs)
		}
	}
	return nil
}

type upState int

const (
	upHeader  upState = iota // reading a pkt-line length
	upPayload                // inside a pkt-line
	upRaw                    // a raw pack: every byte is pack data
	upEnd                    // after the side-band's closing flush: nothing more is read
)

// packGuard bounds one upload-pack response: its bytes, and the object count its pack
// declares.
type packGuard struct {
	lim      syncLimits
	n        int64
	st       upState
	pkt      pktFramer
	sideband bool // a band line has been seen: pkt-lines now carry the pack
	first    bool // the next payload byte is its line's first
	band     byte // band of the current side-band line; 0 for a preamble line
	preamble int  // ACK/NAK lines seen
	head     [12]byte
	nhead    int
	walker   *packWalker
	// onHeader, if set, is told the declared object count once the header passed the
	// checks, before go-git has it; it may block, and an error refuses the pack.
	onHeader func(objects int64) *fetch.Error
}

// maxPreambleLines bounds the ACK/NAK lines before the pack (one per "have" at most;
// go-git sends no more than a few hundred haves per round).
const maxPreambleLines = 100_000

// check takes the next chunk of the body; a non-nil error refuses it (and what
// follows).
func (g *packGuard) check(p []byte) *fetch.Error {
	g.n += int64(len(p))
	if g.lim.maxPackBytes >= 0 && g.n > g.lim.maxPackBytes {
		what := "limit MaxPackBytes"
		if g.lim.headroom {
			what = "the disk headroom under the disk guard's threshold"
		}
		return limitErr("pack larger than %d bytes (%s)", g.lim.maxPackBytes, what)
	}
	for len(p) > 0 {
		switch g.st {
		case upEnd:
			return nil
		case upRaw:
			return g.packData(p)
		case upPayload:
			c := min(g.pkt.left, len(p))
			b := p[:c]
			p = p[c:]
			g.pkt.left -= c
			if g.first {
				g.first = false
				if !g.sideband && b[0] >= 1 && b[0] <= 3 {
					g.sideband = true
				}
				if g.sideband {
					g.band = b[0]
					b = b[1:]
				} else if g.preamble++; g.preamble > maxPreambleLines {
					return malformed("more than %d lines before the pack", maxPreambleLines)
				}
			}
			if g.sideband && g.band == 1 {
				if err := g.packData(b); err != nil {
					return err
				}
			}
			if g.pkt.left == 0 {
				g.st = upHeader
			}
		case upHeader:
			var done bool
			if p, done = g.pkt.header(p); !done {
				return nil
			}
			if !g.sideband && string(g.pkt.hdr[:]) == "PACK" {
				g.st = upRaw
				if err := g.packData([]byte("PACK")); err != nil {
					return err
				}
				continue
			}
			n, ok := hex4(g.pkt.hdr)
			switch {
			case !ok || (n > 0 && n <= 4) || n > pktMax:
				return malformed("bad pkt-line length %q", g.pkt.hdr[:])
			case n == 0 && g.sideband:
				g.st = upEnd // go-git's demuxer ends the pack at the flush
			case n == 0:
				return malformed("flush before the pack")
			default:
				g.st, g.pkt.left, g.first = upPayload, n-4, true
			}
		}
	}
	return nil
}

// packData inspects pack bytes: the header, then (walk.go) the objects.
func (g *packGuard) packData(b []byte) *fetch.Error {
	if g.walker != nil {
		return g.walker.feed(b)
	}
	if g.nhead == len(g.head) {
		return nil // no object size limit
	}
	c := copy(g.head[g.nhead:], b)
	g.nhead += c
	if g.nhead < len(g.head) {
		return nil
	}
	if fe := checkPackHeader(g.head, g.lim); fe != nil {
		return fe
	}
	if g.onHeader != nil {
		if fe := g.onHeader(int64(binary.BigEndian.Uint32(g.head[8:12]))); fe != nil {
			return fe
		}
	}
	if g.lim.maxObjectBytes < 0 {
		return nil
	}
	g.walker = startPackWalker(binary.BigEndian.Uint32(g.head[8:12]), g.lim.maxObjectBytes)
	return g.walker.feed(b[c:])
}

// ended reports whether the side-band's closing flush has been read.
func (g *packGuard) ended() bool { return g.st == upEnd }

// close stops the object walker, if any.
func (g *packGuard) close() {
	if g.walker != nil {
		g.walker.close()
	}
}

// checkPackHeader refuses a pack header go-git must not see.
func checkPackHeader(h [12]byte, lim syncLimits) *fetch.Error {
	if string(h[:4]) != "PACK" {
		return malformed("the pack does not start with PACK")
	}
	if v := binary.BigEndian.Uint32(h[4:8]); v != 2 && v != 3 {
		return malformed("pack version %d", v)
	}
	count := int64(binary.BigEndian.Uint32(h[8:12]))
	allowed := lim.objectsAllowed()
	if allowed < 0 || count <= allowed {
		return nil
	}
	if lim.maxObjects >= 0 && count > lim.maxObjects {
		return limitErr("pack declares %d objects, over the limit of %d (MaxPackObjects)", count, lim.maxObjects)
	}
	return limitErr("pack declares %d objects, which cannot fit in its byte limit of %d (at least %d bytes each)",
		count, lim.maxPackBytes, minObjectBytes)
}

var errTooSlow = errors.New("transfer too slow")
