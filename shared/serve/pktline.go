package serve

import (
	"fmt"
)

// maxPktLen is the largest pkt-line git allows: 4 bytes of length and 65516 of data
// (gitprotocol-common: LARGE_PACKET_MAX).
const maxPktLen = 65520

// checkPktLines reports whether body is a whole sequence of pkt-lines: every length
// four hex digits, 0000 (flush), 0001 (delim), 0002 (response end) or 4 to 65520,
// and nothing cut short or trailing. upload-pack would refuse such a body too, but
// later and with less clear words, after a process has been started for it.
func checkPktLines(body []byte) error { return walkPktLines(body, nil) }

// walkPktLines is checkPktLines that also hands each packet to each (when not nil): its
// length field n (0 flush, 1 delim, 2 response end, else the line's) and a data line's
// payload.
func walkPktLines(body []byte, each func(n int, line []byte)) error {
	if len(body) == 0 {
		return fmt.Errorf("the request body is empty: git-upload-pack wants pkt-lines")
	}
	for off := 0; off < len(body); {
		if len(body)-off < 4 {
			return fmt.Errorf("pkt-line at byte %d: %d bytes left, a length takes 4", off, len(body)-off)
		}
		n, ok := hex4(body[off : off+4])
		if !ok {
			return fmt.Errorf("pkt-line at byte %d: length %q is not four hex digits", off, printable(body[off:off+4]))
		}
		switch {
		case n <= 2: // flush, delim, response end
			if each != nil {
				each(n, nil)
			}
			off += 4
			continue
		case n == 3:
			return fmt.Errorf("pkt-line at byte %d: length 0003 is invalid", off)
		case n > maxPktLen:
			return fmt.Errorf("pkt-line at byte %d: length %d is over git's maximum of %d", off, n, maxPktLen)
		case off+n > len(body):
			return fmt.Errorf("pkt-line at byte %d: length %d runs past the end of the body (%d bytes)", off, n, len(body))
		}
		if each != nil {
			each(n, body[off+4:off+n])
		}
		off += n
	}
	return nil
}

func hex4(b []byte) (int, bool) {
	n := 0
	for _, c := range b {
		var d byte
		switch {
		case c >= '0' && c <= '9':
			d = c - '0'
		case c >= 'a' && c <= 'f':
			d = c - 'a' + 10
		case c >= 'A' && c <= 'F':
			d = c - 'A' + 10
		default:
			return 0, false
		}
		n = n<<4 | int(d)
	}
	return n, true
}

func printable(b []byte) string {
	out := make([]byte, len(b))
	for i, c := range b {
		if c < 0x20 || c > 0x7e {
			c = '?'
		}
		out[i] = c
	}
	return string(out)
}

// pktLine encodes one pkt-line of data.
func pktLine(data string) []byte {
	return fmt.Appendf(nil, "%04x%s", len(data)+4, data)
}
