package hostile

import (
	"bytes"
	"compress/zlib"
	"encoding/binary"
	"fmt"
	"hash/adler32"
	"io"
	"net/http"
)

// Pack object types (gitformat-pack).
const (
	objBlob     = 3
	objOfsDelta = 6
)

// pkt frames s as one pkt-line.
func pkt(s string) string { return fmt.Sprintf("%04x%s", len(s)+4, s) }

const flush = "0000"

// packHeader is "PACK", version 2, count.
func packHeader(count uint32) []byte {
	h := []byte("PACK\x00\x00\x00\x02\x00\x00\x00\x00")
	binary.BigEndian.PutUint32(h[8:], count)
	return h
}

// objectHeader encodes an entry's type and declared (inflated) size.
func objectHeader(typ byte, size uint64) []byte {
	c := typ<<4 | byte(size&15)
	size >>= 4
	var out []byte
	for size > 0 {
		out = append(out, c|0x80)
		c = byte(size & 0x7f)
		size >>= 7
	}
	return append(out, c)
}

// leb128 encodes a delta size field.
func leb128(u uint64) []byte {
	var out []byte
	for {
		c := byte(u & 0x7f)
		u >>= 7
		if u == 0 {
			return append(out, c)
		}
		out = append(out, c|0x80)
	}
}

// ofsOffset encodes an OFS_DELTA's distance back to its base.
func ofsOffset(rel uint64) []byte {
	out := []byte{byte(rel & 0x7f)}
	for rel >>= 7; rel > 0; rel >>= 7 {
		rel--
		out = append([]byte{0x80 | byte(rel&0x7f)}, out...)
	}
	return out
}

// stored wraps b (at most 65535 bytes) in a zlib stream of one uncompressed block:
// cheap to make, so an endless stream of them costs the server nothing.
func stored(b []byte) []byte {
	out := make([]byte, 0, len(b)+11)
	out = append(out, 0x78, 0x01, 0x01) // zlib header; a final stored block
	out = binary.LittleEndian.AppendUint16(out, uint16(len(b)))
	out = binary.LittleEndian.AppendUint16(out, ^uint16(len(b)))
	out = append(out, b...)
	return binary.BigEndian.AppendUint32(out, adler32.Checksum(b))
}

// deflate compresses b with zlib at level.
func deflate(b []byte, level int) []byte {
	var buf bytes.Buffer
	zw, _ := zlib.NewWriterLevel(&buf, level)
	zw.Write(b)
	zw.Close()
	return buf.Bytes()
}

// sideband writes everything as band-1 pkt-lines of at most 64 KiB and flushes each to
// the client.
type sideband struct {
	w http.ResponseWriter
}

func (s sideband) Write(p []byte) (int, error) {
	const max = 65515 // 65520 minus the length and the band byte
	n := 0
	for len(p) > 0 {
		c := min(len(p), max)
		if _, err := io.WriteString(s.w, fmt.Sprintf("%04x\x01", c+5)); err != nil {
			return n, err
		}
		if _, err := s.w.Write(p[:c]); err != nil {
			return n, err
		}
		if f, ok := s.w.(http.Flusher); ok {
			f.Flush()
		}
		n += c
		p = p[c:]
	}
	return n, nil
}
