package serve

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os/exec"
	"strings"
	"testing"

	"github.com/mirrorfleet/mirrorfleet/internal/testkit/gittest"
	"github.com/mirrorfleet/mirrorfleet/shared/gitcmd"
	"github.com/mirrorfleet/mirrorfleet/shared/serve/packcache"
)

// pkts builds a body: "" is a flush, "|" a delim, "~" a response end, anything else
// a data line.
func pkts(lines ...string) []byte {
	var b []byte
	for _, l := range lines {
		switch l {
		case "":
			b = append(b, "0000"...)
		case "|":
			b = append(b, "0001"...)
		case "~":
			b = append(b, "0002"...)
		default:
			b = append(b, pktLine(l)...)
		}
	}
	return b
}

// uploadPack runs git upload-pack on one request as the front does (its
// configuration, --stateless-rpc), single-threaded so that one request's pack is
// the same bytes every time.
type uploadPack struct {
	git, dir string
}

// outcome is git's answer to a request, as the detector's verdict is checked on it.
type outcome int

const (
	gitError outcome = iota // upload-pack failed
	gitOther                // an answer without a pack, or a pack that depends on what the client has
	gitClone                // a pack, the same as for the request without the client's have and shallow lines
)

func (o outcome) String() string {
	return [...]string{"git failed", "not a clone's answer", "a clone's answer"}[o]
}

func (u uploadPack) run(proto string, body []byte) ([]byte, error) {
	args := append([]string{"-c", "pack.threads=1"}, uploadPackArgs("")...)
	var out bytes.Buffer
	err := gitcmd.Git{Path: u.git}.Run(context.Background(), gitcmd.Cmd{Args: append(args, u.dir),
		Env: []string{"GIT_PROTOCOL=" + proto}, Stdin: bytes.NewReader(body), Stdout: &out})
	return out.Bytes(), err
}

// outcome is what git makes of body: failure, or whether its answer is a whole
// clone's (it has a pack, and the request stripped of what the client has gets the
// same answer).
func (u uploadPack) outcome(t testing.TB, proto string, body []byte) outcome {
	out, err := u.run(proto, body)
	var ee *exec.ExitError
	switch {
	case errors.As(err, &ee):
		return gitError
	case err != nil:
		t.Fatal(err)
	}
	head, pack := answerOf(out)
	if pack == nil {
		return gitOther
	}
	out2, err := u.run(proto, stripClientState(body))
	head2, pack2 := answerOf(out2)
	if err != nil || head != head2 || !bytes.Equal(pack, pack2) {
		return gitOther
	}
	return gitClone
}

// answerOf splits upload-pack's answer into the lines before the pack (sections,
// acknowledgments, shallow lines) and the pack, out of its side-band if it has one;
// progress is left out (its packets are cut as the timing goes). pack is nil when
// there is none.
func answerOf(out []byte) (head string, pack []byte) {
	inPack := false
	for off := 0; off < len(out); {
		if !inPack && bytes.HasPrefix(out[off:], []byte("PACK")) {
			return head, out[off:] // v0 without side-band
		}
		if len(out)-off < 4 {
			return head + "<cut>", pack
		}
		n, ok := hex4(out[off : off+4])
		if !ok {
			return head + "<junk>", pack
		}
		if n <= 2 {
			head += fmt.Sprintf("%04x", n)
			off += 4
			continue
		}
		if n < 4 || off+n > len(out) {
			return head + "<cut>", pack
		}
		data := out[off+4 : off+n]
		off += n
		switch {
		case string(data) == "packfile\n":
			inPack = true
		case len(data) > 0 && data[0] == 1 && (inPack || bytes.HasPrefix(data[1:], []byte("PACK")) || pack != nil):
			inPack = true
			pack = append(pack, data[1:]...)
		case len(data) > 0 && data[0] == 2: // progress; no text line starts with it
		case len(data) > 0 && data[0] == 3:
			head += "<error>"
		default:
			head += string(data)
		}
	}
	return head, pack
}

// stripClientState leaves out the have and shallow lines: what the client has.
func stripClientState(body []byte) []byte {
	var out []byte
	off := 0
	walkPktLines(body, func(n int, line []byte) {
		size := n
		if n <= 2 {
			size = 4
		}
		if !(bytes.HasPrefix(line, []byte("have ")) || bytes.HasPrefix(line, []byte("shallow "))) {
			out = append(out, body[off:off+size]...)
		}
		off += size
	})
	return out
}

// agrees checks a verdict against git's outcome: a clone verdict needs a clone's
// answer (or, with repoErrors, a failure the repository causes: a want it lacks — a
// failed answer is never cached); an invalid verdict needs a failure; a notClone
// verdict needs anything but a clone's answer unless conservative (a have or
// shallow line git finds changes nothing, a line the detector leaves to git).
func agrees(v verdict, o outcome, repoErrors, conservative bool) bool {
	switch v {
	case clone:
		return o == gitClone || (repoErrors && o == gitError)
	case invalid:
		return o == gitError
	default:
		return o != gitClone || conservative
	}
}

// detectRepo is a small repository with history, a branch and an annotated tag, and
// object ids of its commits, a tree and a blob.
type detectRepo struct {
	up                      uploadPack
	head, parent, root, tag string
	blob                    string
}

func newDetectRepo(t testing.TB) detectRepo {
	git, err := gitcmd.Find(context.Background())
	if err != nil {
		t.Skip(err)
	}
	r := gittest.NewServer(t).NewRepo(t, "d/r.git")
	var root string
	for i := range 4 {
		c := r.Commit(t, "c", map[string][]byte{"f": gittest.RandomBytes(t, 2<<10+i), "big": gittest.RandomBytes(t, 40<<10+i)})
		if i == 0 {
			root = c
		}
	}
	r.Branch(t, "side", "HEAD~2")
	r.AnnotatedTag(t, "v1", "HEAD~1", "v1")
	d := detectRepo{up: uploadPack{git: git.Path, dir: r.Bare}, head: r.Head(t), root: root,
		parent: r.Out(t, "rev-parse", "HEAD~1"), blob: r.Out(t, "rev-parse", "HEAD:f"),
		tag: r.Out(t, "rev-parse", "v1")}
	return d
}

type detectCase struct {
	name         string
	proto        string
	body         []byte
	want         verdict
	conservative bool // git's answer is a clone's, which the detector does not claim
}

func (d detectRepo) cases() []detectCase {
	const v2 = "version=2"
	want := "want " + d.head + "\n"
	caps := []string{"command=fetch\n", "agent=git/2.39.5\n", "object-format=sha1\n", "|"}
	fetch := func(args ...string) []byte { return pkts(append(append(caps[:len(caps):len(caps)], args...), "")...) }
	zeros := strings.Repeat("0", 40)
	v0 := func(lines ...string) []byte { return pkts(lines...) }
	return []detectCase{
		// Clones.
		{"v2 clone", v2, fetch(want, "thin-pack\n", "ofs-delta\n", "no-progress\n", "done\n"), clone, false},
		{"v2 clone with progress", v2, fetch(want, "ofs-delta\n", "done\n"), clone, false},
		{"v2 clone of two wants and a tag", v2, fetch(want, "want "+d.tag+"\n", "include-tag\n", "done\n"), clone, false},
		{"v2 clone without done", v2, fetch(want, "ofs-delta\n"), clone, false},
		{"v2 clone with wait-for-done", v2, fetch(want, "wait-for-done\n", "done\n"), clone, false},
		{"v2 clone, no capabilities", v2, pkts("command=fetch\n", "|", want, "done\n", ""), clone, false},
		{"v2 clone, no newlines", v2, pkts("command=fetch", "|", strings.TrimSuffix(want, "\n"), "done", ""), clone, false},
		{"v2 clone with a server option", v2, pkts("command=fetch\n", "server-option=x\n", "|", want, "done\n", ""), clone, false},
		{"v2 shallow clone", v2, fetch(want, "deepen 1\n", "done\n"), clone, false},
		{"v2 deepen-since", v2, fetch(want, "deepen-since 1\n", "done\n"), clone, false},
		{"v2 deepen-not", v2, fetch(want, "deepen-not refs/heads/side\n", "done\n"), clone, false},
		{"v2 deepen-relative", v2, fetch(want, "deepen 2\n", "deepen-relative\n", "done\n"), clone, false},
		{"v2 blob:none", v2, fetch(want, "filter blob:none\n", "done\n"), clone, false},
		{"v2 blob:limit", v2, fetch(want, "filter blob:limit=10k\n", "done\n"), clone, false},
		{"v2 tree:0", v2, fetch(want, "filter tree:0\n", "done\n"), clone, false},
		{"v2 object:type", v2, fetch(want, "filter object:type=commit\n", "done\n"), clone, false},
		{"v2 clone, a fetch after it", v2, append(fetch(want, "done\n"), fetch(want, "have "+d.parent+"\n", "done\n")...), clone, false},
		{"v0 clone", "", v0("want "+d.head+" multi_ack_detailed side-band-64k thin-pack ofs-delta agent=git/2.39.5\n", "", "done\n"), clone, false},
		{"v0 clone, no capabilities", "", v0(want, "", "done\n"), clone, false},
		{"v1 clone", "version=1", v0("want "+d.head+" side-band-64k ofs-delta\n", "", "done\n"), clone, false},
		{"v0 shallow clone", "", v0("want "+d.head+" side-band-64k shallow\n", "deepen 1\n", "", "done\n"), clone, false},
		{"v0 partial clone", "", v0("want "+d.head+" side-band-64k filter\n", "filter blob:none\n", "", "done\n"), clone, false},
		{"v0 done then more", "", v0(want, "", "done\n", "have "+d.parent+"\n"), clone, false},
		// Fetches and other answers.
		{"v2 fetch with a have", v2, fetch(want, "have "+d.parent+"\n", "done\n"), notClone, false},
		{"v2 negotiation round", v2, fetch(want, "have "+d.parent+"\n"), notClone, false},
		{"v2 deepening fetch", v2, fetch(want, "shallow "+d.parent+"\n", "deepen 3\n", "done\n"), notClone, false},
		{"v2 have unknown to git", v2, fetch(want, "have "+zeros+"\n", "done\n"), notClone, true},
		{"v2 no wants", v2, fetch("done\n"), notClone, false},
		{"v2 fetch with no arguments", v2, pkts("command=fetch\n", ""), notClone, false},
		{"v2 ls-refs", v2, pkts("command=ls-refs\n", "agent=git/2.39.5\n", "|", "peel\n", "symrefs\n", ""), notClone, false},
		{"v2 ls-refs, then a fetch (one request per run)", v2, append(pkts("command=ls-refs\n", ""), fetch(want, "done\n")...), notClone, false},
		{"v2 flush alone", v2, pkts(""), notClone, false},
		{"v2 flush, then a fetch", v2, append(pkts(""), fetch(want, "done\n")...), notClone, false},
		{"v0 fetch with a have", "", v0(want, "", "have "+d.parent+"\n", "done\n"), notClone, false},
		{"v0 negotiation round", "", v0(want, "", "have "+d.parent+"\n", ""), notClone, false},
		{"v0 wants, flush, no done", "", v0(want, "", ""), notClone, false},
		{"v0 flush alone", "", v0("", "done\n"), notClone, false},
		{"v0 deepening fetch to what the client has", "", v0("want "+d.head+" shallow\n", "shallow "+d.parent+"\n", "deepen 1\n", "", "done\n"), notClone, true},
		{"v0 deepening fetch", "", v0("want "+d.head+" shallow\n", "shallow "+d.parent+"\n", "deepen 3\n", "", "done\n"), notClone, false},
		{"v0 no done", "", v0(want, ""), notClone, false},
		// Refused.
		{"v2 unknown capability", v2, pkts("command=fetch\n", "frobnicate\n", "|", want, "done\n", ""), invalid, false},
		{"v2 session id not advertised", v2, pkts("command=fetch\n", "session-id=abc\n", "|", want, "done\n", ""), invalid, false},
		{"v2 sha256", v2, pkts("command=fetch\n", "object-format=sha256\n", "|", want, "done\n", ""), invalid, false},
		{"v2 unknown command", v2, pkts("command=push\n", ""), invalid, false},
		{"v2 two commands", v2, pkts("command=fetch\n", "command=ls-refs\n", "|", want, ""), invalid, false},
		{"v2 no command", v2, pkts("agent=git/2.39.5\n", ""), invalid, false},
		{"v2 want in the capabilities", v2, pkts("command=fetch\n", want, "done\n", ""), invalid, false},
		{"v2 unexpected argument", v2, fetch(want, "frobnicate\n", "done\n"), invalid, false},
		{"v2 agent among the arguments", v2, fetch(want, "agent=git/2.39.5\n", "done\n"), invalid, false},
		{"v2 want-ref not allowed", v2, fetch("want-ref refs/heads/main\n", "done\n"), invalid, false},
		{"v2 sideband-all not allowed", v2, fetch(want, "sideband-all\n", "done\n"), invalid, false},
		{"v2 short want", v2, fetch("want 1234\n", "done\n"), invalid, false},
		{"v2 bad have", v2, fetch(want, "have xyz\n", "done\n"), invalid, false},
		{"v2 deepen 0", v2, fetch(want, "deepen 0\n", "done\n"), invalid, false},
		{"v2 deepen and deepen-since", v2, fetch(want, "deepen 1\n", "deepen-since 1\n", "done\n"), invalid, false},
		{"v2 two filters", v2, fetch(want, "filter blob:none\n", "filter tree:0\n", "done\n"), invalid, false},
		{"v2 arguments without their flush", v2, pkts("command=fetch\n", "|", want, "done\n"), invalid, false},
		{"v2 arguments ended by a delim", v2, pkts("command=fetch\n", "|", want, "done\n", "|"), invalid, false},
		{"v2 response end", v2, pkts("command=fetch\n", "~"), invalid, false},
		{"v2 capabilities without their end", v2, pkts("command=fetch\n"), invalid, false},
		{"v0 no flush after the wants", "", v0(want), invalid, false},
		{"v0 filter not negotiated", "", v0(want, "filter blob:none\n", "", "done\n"), invalid, false},
		{"v0 v2 body", "", fetch(want, "done\n"), invalid, false},
		{"v0 junk for a have", "", v0(want, "", "frobnicate\n", "done\n"), invalid, false},
	}
}

// The detector's verdict on each request of the corpus, and git's own answer to it:
// clones, fetches with haves, shallow and partial requests, several commands,
// malformed ones.
func TestCloneDetectorAgreesWithUploadPack(t *testing.T) {
	d := newDetectRepo(t)
	for _, c := range d.cases() {
		v, key := detect(c.proto, c.body)
		if v != c.want {
			t.Errorf("%s: detector says %v, want %v", c.name, v, c.want)
		}
		if (v == clone) != (key != nil) {
			t.Errorf("%s: %v with key %q", c.name, v, key)
		}
		o := d.up.outcome(t, c.proto, c.body)
		if !agrees(v, o, false, c.conservative) {
			t.Errorf("%s: detector says %v, git: %v", c.name, v, o)
		}
		if c.conservative && o != gitClone {
			t.Errorf("%s: marked conservative, but git's answer is %v", c.name, o)
		}
	}
}

// FuzzCloneDetector feeds the detector what the fuzzer makes of the corpus, and git
// upload-pack the same bodies: a clone verdict must be a clone's answer (or a failure
// caused by the repository, never cached), an invalid one a failure.
func FuzzCloneDetector(f *testing.F) {
	d := newDetectRepo(f)
	for _, c := range d.cases() {
		f.Add(c.proto == "version=2", c.body)
	}
	f.Fuzz(func(t *testing.T, v2 bool, body []byte) {
		proto := ""
		if v2 {
			proto = "version=2"
		}
		v, key := detect(proto, body)
		if checkPktLines(body) != nil {
			if v != invalid {
				t.Fatalf("a body the front refuses is %v", v)
			}
			return // the front answers 400: git never sees it
		}
		if (v == clone) != (key != nil) {
			t.Fatalf("%v with key %q", v, key)
		}
		if v2, key2 := detect(proto, body); v2 != v || !bytes.Equal(key, key2) {
			t.Fatal("the detector is not deterministic")
		}
		o := d.up.outcome(t, proto, body)
		if !agrees(v, o, true, true) {
			t.Fatalf("detector says %v, git: %v, for %q", v, o, body)
		}
	})
}

// Issue 23's request: ls-refs, a flush, then a fetch ending in done. upload-pack
// answers the ls-refs alone (one request per run), and the front keeps no entry for
// it: it is no clone.
func TestLsRefsThenFetchIsNoClone(t *testing.T) {
	e := newEnv(t)
	r := e.repo("example.com/team/app.git")
	body := append([]byte(lsRefs), pkts("command=fetch\n", "|", "want "+r.Head(t)+"\n", "done\n", "")...)
	hdr := map[string]string{"Content-Type": uploadCT, "Git-Protocol": "version=2"}
	for range 2 {
		status, _, out := e.do("POST", "/git/example.com/team/app.git/git-upload-pack", hdr, body)
		if status != 200 || !strings.Contains(out, r.Head(t)+" refs/heads/main") || strings.Contains(out, "packfile") {
			t.Fatalf("%d %q: want ls-refs' answer", status, out)
		}
	}
	if _, entries, _ := packcache.Size(e.cache); entries != 0 {
		t.Fatalf("%d cache entries for an ls-refs answer", entries)
	}
}
