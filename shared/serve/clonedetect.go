package serve

import (
	"bytes"
	"fmt"
	"strconv"
	"strings"
)

// verdict is what git upload-pack (--stateless-rpc, as the front runs it) makes of a
// request body.
type verdict int

const (
	// notClone: git answers something else than a whole clone (refs, acknowledgments,
	// nothing, a pack that depends on what the client has), or the detector cannot be
	// sure it answers one.
	notClone verdict = iota
	// clone: git answers with a pack of the wants and nothing the client has (a
	// clone, shallow or partial included) — or fails for the repository's reasons (a
	// want it lacks), an answer the cache never keeps.
	clone
	// invalid: git refuses the request whatever the repository holds.
	invalid
)

func (v verdict) String() string {
	return [...]string{"not a clone", "clone", "invalid"}[v]
}

// packet is one pkt-line as git's packet reader gives it to upload-pack: n is the
// length field (0 flush, 1 delim, 2 response end, else a data line) and line the
// data with one trailing newline chomped, up to its first NUL (git reads it as a C
// string). raw is the whole packet as sent.
type packet struct {
	n    int
	line string
	raw  []byte
}

func packets(body []byte) ([]packet, error) {
	var ps []packet
	off := 0
	err := walkPktLines(body, func(n int, data []byte) {
		size := n
		if n <= 2 {
			size = 4
		}
		p := packet{n: n, raw: body[off : off+size]}
		off += size
		if n > 2 {
			d := bytes.TrimSuffix(data, []byte("\n"))
			if i := bytes.IndexByte(d, 0); i >= 0 {
				d = d[:i]
			}
			p.line = string(d)
		}
		ps = append(ps, p)
	})
	return ps, err
}

// isV2 reports whether upload-pack speaks protocol v2 for this Git-Protocol value:
// any of its colon-separated items is version=2 (git takes the highest version named).
func isV2(proto string) bool {
	for _, item := range strings.Split(proto, ":") {
		if item == "version=2" {
			return true
		}
	}
	return false
}

// cloneRequest reports whether upload-pack answers this request with a whole clone
// (detect), and if so returns the request as the response cache keys it.
func cloneRequest(proto string, body []byte) (key []byte, ok bool) {
	v, key := detect(proto, body)
	return key, v == clone
}

// detect parses a request body as git upload-pack does (git 2.39's upload-pack.c and
// serve.c: one request per stateless-rpc run, protocol v2 or v0/v1 by the
// Git-Protocol header, with the front's configuration: filters allowed, no
// ref-in-want, no sideband-all, no session ids) and says what git makes of it. Where
// git's answer depends on more than the body's syntax the verdict leans to notClone:
// a wrong clone verdict would cache an answer that is not a clone's. For a clone it
// also returns the key: the body without the client's agent= and session-id=
// (they name the client, not what it asks for).
//
// The differential test runs git upload-pack on a corpus of bodies and checks each
// verdict against git's answer; FuzzCloneDetector does the same on what it finds.
func detect(proto string, body []byte) (verdict, []byte) {
	ps, err := packets(body)
	if err != nil {
		return invalid, nil
	}
	if isV2(proto) {
		return detectV2(ps)
	}
	return detectV0(ps)
}

// args tracks what a fetch's arguments ask for.
type args struct {
	wants, haves, shallows int
	deepen, deepenRev      bool // deepen N; deepen-since or deepen-not
	filters                int
	unsure                 bool // a line whose meaning to git the detector does not claim to know
}

// shallowArg parses the shallow and deepen lines v2 and v0 share; ok=false if line
// is none of them; bad if git dies on it.
func (a *args) shallowArg(line string) (ok, bad bool) {
	switch {
	case strings.HasPrefix(line, "shallow "):
		if !hexOID(line[len("shallow "):]) {
			return true, true
		}
		a.shallows++
	case strings.HasPrefix(line, "deepen "):
		// strtol(arg, &end, 0), then end at the string's end and depth > 0.
		n, sure := plainNumber(line[len("deepen "):], 1<<31-1)
		switch {
		case !sure:
			a.unsure = true
		case n <= 0:
			return true, true
		}
		a.deepen = true
	case strings.HasPrefix(line, "deepen-since "):
		n, sure := plainNumber(line[len("deepen-since "):], 1<<62)
		switch {
		case !sure:
			a.unsure = true
		case n == 0:
			return true, true
		}
		a.deepenRev = true
	case strings.HasPrefix(line, "deepen-not "):
		a.deepenRev = true // a ref git resolves in the repository (or dies)
	case line == "deepen-relative":
	default:
		return false, false
	}
	return true, false
}

// filterArg parses a filter line's spec: a second filter is refused; specs other than
// the common ones are left to git (unsure).
func (a *args) filterArg(spec string) (bad bool) {
	a.filters++
	if a.filters > 1 {
		return true // "multiple filter-specs cannot be combined"
	}
	if !knownFilter(spec) {
		a.unsure = true
	}
	return false
}

// verdict is the fetch's verdict once its arguments are read: a pack of wants only,
// with no have and no shallow line (what the client has), is a clone.
func (a *args) verdict() verdict {
	if a.deepen && a.deepenRev {
		return invalid // deepen and deepen-since (or deepen-not) cannot be used together
	}
	if a.unsure || a.wants == 0 || a.haves > 0 || a.shallows > 0 {
		return notClone
	}
	return clone
}

func detectV2(ps []packet) (verdict, []byte) {
	var key []byte
	i, command, seen, ended := 0, "", false, false
	// The command and capability lines, up to a delim (consumed) or a flush (left
	// for the command).
keys:
	for ; i < len(ps); i++ {
		p := ps[i]
		switch p.n {
		case 0:
			if !seen {
				return notClone, nil // no request at all: git ends with no answer
			}
			ended = true
			break keys
		case 1:
			key = append(key, p.raw...)
			i++
			ended = true
			break keys
		case 2:
			return invalid, nil // git: BUG("unexpected response end packet")
		}
		seen = true
		if name, ok := strings.CutPrefix(p.line, "command="); ok {
			if command != "" {
				return invalid, nil // a second command
			}
			switch name {
			case "fetch", "ls-refs", "object-info":
				command = name
			default:
				return invalid, nil
			}
			key = append(key, p.raw...)
			continue
		}
		name, value, hasValue := strings.Cut(p.line, "=")
		switch name {
		case "agent":
			continue // names the client, not what it asks for
		case "server-option":
			key = append(key, p.raw...)
		case "object-format":
			if !hasValue {
				return notClone, nil // left to git
			}
			if value != "sha1" {
				return invalid, nil // unknown, or not the mirrors' (sha1)
			}
			key = append(key, p.raw...)
		default:
			// session-id is only taken when the server advertises it, which this
			// one does not (transfer.advertiseSID).
			return invalid, nil
		}
	}
	if !ended {
		return invalid, nil // the body ended inside the keys: git reads on into its end
	}
	if command == "" {
		return invalid, nil // "no command requested"
	}
	if command != "fetch" {
		return notClone, nil
	}
	var a args
	for ; ; i++ {
		if i == len(ps) {
			return invalid, nil // the end of input before the arguments' flush
		}
		p := ps[i]
		if p.n <= 2 {
			if p.n != 0 {
				return invalid, nil // "expected flush after fetch arguments"
			}
			break
		}
		key = append(key, p.raw...)
		l := p.line
		if ok, bad := a.shallowArg(l); ok {
			if bad {
				return invalid, nil
			}
			continue
		}
		switch {
		case strings.HasPrefix(l, "want "):
			if !hexOID(l[len("want "):]) {
				return invalid, nil
			}
			a.wants++
		case strings.HasPrefix(l, "have "):
			if !hexOID(l[len("have "):]) {
				return invalid, nil
			}
			a.haves++
		case l == "thin-pack", l == "ofs-delta", l == "no-progress", l == "include-tag", l == "done", l == "wait-for-done":
		case strings.HasPrefix(l, "filter "):
			if a.filterArg(l[len("filter "):]) {
				return invalid, nil
			}
		case strings.HasPrefix(l, "packfile-uris "):
			a.unsure = true
		default:
			// want-ref (no uploadpack.allowRefInWant), sideband-all (not allowed) and
			// anything else: "unexpected line".
			return invalid, nil
		}
	}
	// What follows the arguments' flush is never read: one request per run.
	v := a.verdict()
	if v != clone {
		return v, nil
	}
	return clone, append(key, "0000"...)
}

func detectV0(ps []packet) (verdict, []byte) {
	var key []byte
	var a args
	filterCap := false
	i := 0
	// The wants, shallow and deepen lines, up to a flush (or any other special packet).
	for ; ; i++ {
		if i == len(ps) {
			return invalid, nil // the end of input: git dies
		}
		p := ps[i]
		if p.n <= 2 {
			key = fmt.Appendf(key, "%04x", p.n)
			i++
			break
		}
		l := p.line
		if ok, bad := a.shallowArg(l); ok {
			if bad {
				return invalid, nil
			}
			key = append(key, p.raw...)
			continue
		}
		if spec, ok := strings.CutPrefix(l, "filter "); ok {
			if !filterCap || a.filterArg(spec) {
				return invalid, nil // "filtering capability not negotiated"
			}
			key = append(key, p.raw...)
			continue
		}
		rest, ok := strings.CutPrefix(l, "want ")
		if !ok || !hexOID(rest) {
			return invalid, nil // "expected to get object ID"
		}
		a.wants++
		// The capabilities after the object id, space-separated.
		features := strings.Split(rest[40:], " ")
		kept := features[:0]
		for _, f := range features {
			if hasFeature(f, "filter") {
				filterCap = true
			}
			if !clientOnly(f) {
				kept = append(kept, f)
			}
		}
		key = append(key, pktLine("want "+rest[:40]+strings.Join(kept, " ")+"\n")...)
	}
	if a.wants == 0 {
		return notClone, nil // git ends with no answer
	}
	if a.deepen && a.deepenRev {
		return invalid, nil
	}
	// The haves, up to done; a flush or the end of input first ends the round with a
	// NAK and the run.
	for ; ; i++ {
		if i == len(ps) {
			return notClone, nil
		}
		p := ps[i]
		if p.n <= 2 {
			return notClone, nil
		}
		l := p.line
		switch {
		case strings.HasPrefix(l, "have "):
			if !hexOID(l[len("have "):]) {
				return invalid, nil
			}
			a.haves++
			key = append(key, p.raw...)
		case l == "done":
			v := a.verdict()
			if v != clone {
				return v, nil
			}
			return clone, append(key, p.raw...)
		default:
			return invalid, nil // "expected SHA1 list"
		}
	}
}

// hasFeature is git's parse_feature_request for one space-separated token: the
// feature's name alone or followed by '='.
func hasFeature(token, name string) bool {
	rest, ok := strings.CutPrefix(token, name)
	return ok && (rest == "" || rest[0] == '=')
}

// hexOID reports whether s starts with a full SHA-1 object id in hex, as git's
// get_oid_hex reads it (what follows is not looked at).
func hexOID(s string) bool {
	if len(s) < 40 {
		return false
	}
	for i := range 40 {
		c := s[i]
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F') {
			return false
		}
	}
	return true
}

// plainNumber reads s as a plain decimal number up to max, as strtol or
// parse_timestamp would; sure=false for anything else (signs, spaces, other bases,
// overflow), whose reading by C the detector does not claim to know.
func plainNumber(s string, max int64) (n int64, sure bool) {
	if s == "" {
		return 0, false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return 0, false
		}
	}
	if len(s) > 1 && s[0] == '0' {
		return 0, false // octal to strtol
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n > max {
		return 0, false
	}
	return n, true
}

// knownFilter reports whether spec is one of the filter specs git takes as such:
// blob:none, blob:limit=N[kmg], tree:N, object:type=T.
func knownFilter(spec string) bool {
	switch {
	case spec == "blob:none":
		return true
	case strings.HasPrefix(spec, "blob:limit="):
		v := strings.TrimRight(spec[len("blob:limit="):], "kmgKMG")
		if len(spec[len("blob:limit="):])-len(v) > 1 {
			return false
		}
		_, sure := plainNumber(v, 1<<40)
		return sure
	case strings.HasPrefix(spec, "tree:"):
		_, sure := plainNumber(spec[len("tree:"):], 1<<31-1)
		return sure
	case strings.HasPrefix(spec, "object:type="):
		switch spec[len("object:type="):] {
		case "blob", "tree", "commit", "tag":
			return true
		}
	}
	return false
}

// clientOnly reports whether a capability names the client rather than the request.
func clientOnly(c string) bool {
	return strings.HasPrefix(c, "agent=") || strings.HasPrefix(c, "session-id=")
}
