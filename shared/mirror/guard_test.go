package mirror

import (
	"bytes"
	"compress/zlib"
	"encoding/binary"
	"fmt"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/mirrorfleet/mirrorfleet/internal/testkit/gittest"
	"github.com/mirrorfleet/mirrorfleet/shared/fetch"
)

func pktLine(s string) string { return fmt.Sprintf("%04x%s", len(s)+4, s) }

func header(count uint32) []byte {
	h := []byte("PACK\x00\x00\x00\x02\x00\x00\x00\x00")
	binary.BigEndian.PutUint32(h[8:], count)
	return h
}

// sidebandOf frames pack as band-1 pkt-lines of at most size bytes each, with a
// progress line after the first.
func sidebandOf(pack []byte, size int) string {
	s, _ := sidebandAt(pack, size)
	return s
}

// sidebandAt is sidebandOf, and where in it the pack's 12-byte header ends.
func sidebandAt(pack []byte, size int) (string, int) {
	var b strings.Builder
	end := -1
	for i := 0; i < len(pack); i += size {
		line := pack[i:min(i+size, len(pack))]
		if i <= 11 && i+len(line) > 11 {
			end = b.Len() + 5 + (11 - i) + 1
		}
		b.WriteString(pktLine("\x01" + string(line)))
		if i == 0 {
			b.WriteString(pktLine("\x02counting objects\n"))
		}
	}
	return b.String() + "0000", end
}

// feedChunks runs check over stream cut into chunks of n bytes; it returns the first
// refusal and how many bytes had been accepted before it.
func feedChunks(check func([]byte) *fetch.Error, stream string, n int) (*fetch.Error, int) {
	for i := 0; i < len(stream); i += n {
		if fe := check([]byte(stream[i:min(i+n, len(stream))])); fe != nil {
			return fe, i
		}
	}
	return nil, len(stream)
}

func TestPackGuardHeader(t *testing.T) {
	lim := syncLimits{maxPackBytes: 1 << 20, maxObjects: 150_000, maxObjectBytes: -1}
	ends := map[string]int{} // stream -> where its pack header ends; raw streams: after "PACK" + 8
	nak := pktLine("NAK\n")
	acks := pktLine("ACK 1234567890abcdef1234567890abcdef12345678 common\n") + nak
	// sb is a side-band stream after prefix, and where the pack header ends in it.
	sb := func(prefix string, pack []byte, size int) string {
		s, end := sidebandAt(pack, size)
		ends[prefix+s] = len(prefix) + end
		return prefix + s
	}
	cases := []struct {
		name   string
		stream string
		kind   fetch.Kind // "" = accepted
		say    string
	}{
		{"sideband, small count", sb(nak, append(header(10), "xyz"...), 7), "", ""},
		{"sideband, lying count", sb(nak, append(header(1<<31-1), "xyz"...), 7), fetch.KindLimit, "2147483647 objects"},
		{"sideband after ACKs", sb(acks, header(1<<31-1), 5), fetch.KindLimit, "over the limit of 150000"},
		{"raw, lying count", nak + string(header(1<<31-1)), fetch.KindLimit, "2147483647"},
		{"raw, small count", nak + string(header(3)) + "rest", "", ""},
		{"count over the byte cap", nak + string(header(120_000)), fetch.KindLimit, "cannot fit"},
		{"count over the object cap", sb(nak, header(150_001), 12), fetch.KindLimit, "MaxPackObjects"},
		{"bad version", nak + string([]byte("PACK\x00\x00\x00\x09\x00\x00\x00\x01")), fetch.KindCorrupt, "version 9"},
		{"bad length", "zzzz", fetch.KindCorrupt, "pkt-line length"},
		{"flush before the pack", nak + "0000", fetch.KindCorrupt, "flush"},
		{"oversized line", nak + "fff5", fetch.KindCorrupt, "length"},
		{"not a pack", nak + sidebandOf([]byte("JUNKJUNKJUNKJUNK"), 16), fetch.KindCorrupt, "PACK"},
		{"too many bytes", nak + sidebandOf(append(header(2), make([]byte, 2<<20)...), 60000), fetch.KindLimit, "pack larger than"},
	}
	for _, c := range cases {
		for _, chunk := range []int{1, 3, 4, 5, 13, 64 << 10} {
			t.Run(fmt.Sprintf("%s/%d", c.name, chunk), func(t *testing.T) {
				g := &packGuard{lim: lim}
				fe, at := feedChunks(g.check, c.stream, chunk)
				switch {
				case c.kind == "" && fe != nil:
					t.Fatalf("refused at byte %d: %v", at, fe)
				case c.kind != "" && fe == nil:
					t.Fatal("accepted")
				case c.kind != "" && (fe.Kind != c.kind || !strings.Contains(fe.Error(), c.say)):
					t.Fatalf("refusal %v, want %s saying %q", fe, c.kind, c.say)
				}
				if fe != nil && strings.Contains(fe.Error(), "declares") {
					// The header never passes whole: the chunk that completes it is refused.
					end, ok := ends[c.stream]
					if !ok {
						end = strings.Index(c.stream, "PACK") + 12
					}
					if at >= end {
						t.Fatalf("refused the chunk at byte %d, after the header ended at byte %d", at, end)
					}
				}
			})
		}
	}
}

func TestRefAdvGuard(t *testing.T) {
	adv := pktLine("# service=git-upload-pack\n") + "0000"
	for i := range 50 {
		adv += pktLine(fmt.Sprintf("1234567890abcdef1234567890abcdef12345678 refs/heads/b%d\n", i))
	}
	adv += "0000"
	for _, c := range []struct {
		name     string
		maxBytes int64
		maxRefs  int
		say      string
	}{
		{"within", 1 << 20, 50, ""},
		{"too many refs", 1 << 20, 40, "more than 40 refs"},
		{"too many bytes", 1000, 1000, "larger than 1000 bytes"},
		{"no limits", -1, -1, ""},
	} {
		for _, chunk := range []int{1, 7, 4096} {
			g := &refAdvGuard{maxBytes: c.maxBytes, maxRefs: c.maxRefs}
			fe, _ := feedChunks(g.check, adv, chunk)
			if (fe == nil) != (c.say == "") || fe != nil && (fe.Kind != fetch.KindLimit || !strings.Contains(fe.Error(), c.say)) {
				t.Fatalf("%s, chunks of %d: refusal %v, want %q", c.name, chunk, fe, c.say)
			}
		}
	}
}

// TestPackWalkerOnRealPacks walks packs git itself made (deltas included) without
// refusing them, and refuses them when one object is over the limit.
func TestPackWalkerOnRealPacks(t *testing.T) {
	srv := gittest.NewServer(t)
	r := srv.NewWorkRepo(t, "walk")
	big := gittest.RandomBytes(t, 300<<10)
	for i := range 8 {
		big[i*1000] ^= 0xff // similar blobs: deltas
		r.Commit(t, fmt.Sprintf("c%d", i), map[string][]byte{"big.bin": big, fmt.Sprintf("f%d", i): []byte(strings.Repeat("x", i*100))})
	}
	cmd := exec.Command("git", "-C", r.Dir, "pack-objects", "--stdout", "--revs", "--delta-base-offset")
	cmd.Stdin = strings.NewReader("HEAD\n")
	cmd.Env = gittest.Env(srv.Home)
	pack, err := cmd.Output()
	if err != nil {
		t.Fatal(err)
	}
	stream := pktLine("NAK\n") + sidebandOf(pack, 65515)
	for _, c := range []struct {
		maxObject int64
		refuse    bool
	}{{1 << 20, false}, {-1, false}, {200 << 10, true}} {
		for _, chunk := range []int{1 << 10, 64 << 10} {
			g := &packGuard{lim: syncLimits{maxPackBytes: -1, maxObjects: -1, maxObjectBytes: c.maxObject}}
			fe, _ := feedChunks(g.check, stream, chunk)
			g.close()
			if (fe != nil) != c.refuse {
				t.Fatalf("max object %d, chunks of %d: refusal %v, want refused=%v", c.maxObject, chunk, fe, c.refuse)
			}
		}
	}
}

func TestWalkObjectsRefusesMalformed(t *testing.T) {
	var z bytes.Buffer
	zw := zlib.NewWriter(&z)
	zw.Write([]byte("hello"))
	zw.Close()
	blob := append([]byte{0x35}, z.Bytes()...) // blob, 5 bytes
	for _, c := range []struct {
		name string
		pack []byte
		say  string
	}{
		{"bad type", append([]byte{0x55}, z.Bytes()...), "type 5"},
		{"truncated", blob[:4], "unexpected EOF"},
		{"bad zlib", append([]byte{0x35}, "garbage!"...), "pack object 0"},
	} {
		g := &packGuard{lim: syncLimits{maxPackBytes: -1, maxObjects: -1, maxObjectBytes: 1 << 20}}
		fe, _ := feedChunks(g.check, pktLine("NAK\n")+sidebandOf(append(header(2), c.pack...), 100), 1<<10)
		g.close()
		if c.name == "truncated" && fe == nil {
			continue // the stream just ends: go-git reports it; nothing for the guard to refuse
		}
		if fe == nil || !strings.Contains(fe.Error(), c.say) {
			t.Fatalf("%s: refusal %v, want one saying %q", c.name, fe, c.say)
		}
	}
}

func TestLimitsForTarget(t *testing.T) {
	l := Limits{PackBytesFor: map[string]int64{
		"https://big.example/":          100,
		"https://big.example/org/":      200,
		"https://big.example/org/giant": 300,
	}}.withDefaults()
	for _, c := range []struct {
		url      string
		maxBytes int64
		want     int64
		headroom bool
	}{
		{"https://small.example/a/b", 0, DefaultMaxPackBytes, false},
		{"https://big.example/x/y", 0, 100, false},
		{"https://big.example/org/y", 0, 200, false},
		{"https://big.example/org/giant", 0, 300, false},
		{"https://big.example/org/giantess", 0, 200, false},
		{"https://big.example/org/giant", 50, 50, true},
		{"https://small.example/a/b", DefaultMaxPackBytes + 1, DefaultMaxPackBytes, false},
	} {
		s := l.forTarget(fetch.Target{URL: c.url, MaxBytes: c.maxBytes})
		if s.maxPackBytes != c.want || s.headroom != c.headroom {
			t.Errorf("%s (headroom %d): cap %d (headroom %v), want %d (%v)", c.url, c.maxBytes, s.maxPackBytes, s.headroom, c.want, c.headroom)
		}
	}
	if err := (Limits{PackBytesFor: map[string]int64{"big.example/": 1}}).Validate(); err == nil {
		t.Error("an override key that is not a URL was accepted")
	}
	if n := (syncLimits{maxPackBytes: 9*100 + packOverhead, maxObjects: -1}).objectsAllowed(); n != 100 {
		t.Errorf("objects allowed in %d bytes: %d, want 100", 9*100+packOverhead, n)
	}
}

func TestTooSlow(t *testing.T) {
	for _, c := range []struct {
		got  int64
		rate int64
		win  time.Duration
		want bool
	}{
		{0, 1024, time.Minute, true},
		{60*1024 - 1, 1024, time.Minute, true},
		{60 * 1024, 1024, time.Minute, false},
		{100, 1024, 100 * time.Millisecond, true},
		{103, 1024, 100 * time.Millisecond, false},
	} {
		if got := tooSlow(c.got, c.rate, c.win); got != c.want {
			t.Errorf("tooSlow(%d bytes, %d B/s, %s) = %v", c.got, c.rate, c.win, got)
		}
	}
}
