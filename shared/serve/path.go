package serve

import (
	"fmt"
	"net/url"
	"path/filepath"
	"strings"

	"github.com/mirrorfleet/mirrorfleet/shared/mirrorpath"
)

// Prefix is where the git front is mounted on a listener.
const Prefix = "/git/"

// CloneURL is the clone URL of the repo whose normalized URL is repoURL on a front at
// base (http://host:port, no trailing slash): base + /git/ + its mirror path, each
// segment URL-escaped (a mirror path may hold "%" from mirrorpath's own escaping).
func CloneURL(base, repoURL string) (string, error) {
	rel, err := mirrorpath.Rel(repoURL)
	if err != nil {
		return "", err
	}
	return strings.TrimRight(base, "/") + Prefix + escapeRel(filepath.ToSlash(rel)), nil
}

func escapeRel(rel string) string {
	segs := strings.Split(rel, "/")
	for i, s := range segs {
		segs[i] = url.PathEscape(s)
	}
	return strings.Join(segs, "/")
}

// What a /git/ request asks for.
type service int

const (
	svcInfoRefs   service = iota + 1 // GET <repo>/info/refs?service=git-upload-pack
	svcUploadPack                    // POST <repo>/git-upload-pack
	svcReceive                       // anything for git-receive-pack: refused
	svcDumb                          // a dumb-protocol file (HEAD, objects/...): refused
)

// request is a parsed /git/ path: the mirror (relative to the root, slash-separated,
// always ending in .git) and the service.
type request struct {
	rel string
	svc service
}

// pathError is a refused path, with the status it gets.
type pathError struct {
	status int
	msg    string
}

func (e *pathError) Error() string { return e.msg }

// dumbFiles are the paths under a repository that only a dumb-protocol client asks
// for; they are named in the refusal so the client's user knows what happened.
var dumbFiles = []string{"HEAD", "objects/", "info/packs", "info/alternates", "info/http-alternates"}

// parsePath splits escapedPath (the request's path as sent, still escaped) after
// /git/ into the mirror's path and the service. It refuses, before anything touches
// the file system: escaped slashes, backslashes and NULs, empty, "." and ".."
// segments (escaped or not), and hidden segments (".tmp", ".trash", ".locks" and
// any other name starting with a dot, which mirrorpath never produces).
func parsePath(escapedPath string) (request, error) {
	rest, ok := strings.CutPrefix(escapedPath, Prefix)
	if !ok {
		return request{}, &pathError{404, "not a /git/ path"}
	}
	lower := strings.ToLower(rest)
	for _, bad := range []string{"%2f", "%5c", "%00", "\\"} {
		if strings.Contains(lower, bad) {
			return request{}, &pathError{400, fmt.Sprintf("the path holds %q: escaped slashes, backslashes and NUL are refused", bad)}
		}
	}
	p, err := url.PathUnescape(rest)
	if err != nil {
		return request{}, &pathError{400, fmt.Sprintf("bad escape in the path: %v", err)}
	}
	segs := strings.Split(p, "/")
	for _, s := range segs {
		switch {
		case s == "":
			return request{}, &pathError{400, "the path has an empty segment"}
		case s == "." || s == "..":
			return request{}, &pathError{400, fmt.Sprintf("the path has a %q segment", s)}
		case s[0] == '.':
			return request{}, &pathError{404, fmt.Sprintf("no mirror at hidden name %q", s)}
		case strings.ContainsAny(s, "\x00"):
			return request{}, &pathError{400, "the path contains NUL"}
		}
	}
	var req request
	switch n := len(segs); {
	case n >= 3 && segs[n-2] == "info" && segs[n-1] == "refs":
		req.svc, segs = svcInfoRefs, segs[:n-2]
	case n >= 2 && segs[n-1] == "git-upload-pack":
		req.svc, segs = svcUploadPack, segs[:n-1]
	case n >= 2 && segs[n-1] == "git-receive-pack":
		req.svc, segs = svcReceive, segs[:n-1]
	default:
		for i := len(segs) - 1; i >= 1; i-- {
			tail := strings.Join(segs[i:], "/")
			for _, d := range dumbFiles {
				if tail == d || (strings.HasSuffix(d, "/") && strings.HasPrefix(tail, d)) {
					return request{rel: repoRel(segs[:i]), svc: svcDumb}, nil
				}
			}
		}
		return request{}, &pathError{404, "not a git smart-HTTP path: clone " + Prefix + "<mirror path>, which serves <mirror path>/info/refs and <mirror path>/git-upload-pack"}
	}
	if len(segs) < 2 {
		return request{}, &pathError{404, "a mirror path is <host>/<path>"}
	}
	req.rel = repoRel(segs)
	return req, nil
}

// repoRel joins segments into a mirror path ending in .git: a clone URL may leave
// the .git out.
func repoRel(segs []string) string {
	rel := strings.Join(segs, "/")
	if !strings.HasSuffix(rel, ".git") {
		rel += ".git"
	}
	return rel
}
