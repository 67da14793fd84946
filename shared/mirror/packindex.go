package mirror

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/format/idxfile"
	"github.com/go-git/go-git/v5/plumbing/format/packfile"
	"github.com/go-git/go-git/v5/plumbing/storer"
	"github.com/go-git/go-git/v5/storage/filesystem"
)

// A first mirror's pack is indexed from disk, not by go-git's PackWriter (ADR 26).
//
// go-git v5 indexes a pack while it streams in with a packfile.Parser that keeps, for
// every object, an objectInfo in a slice and two maps, plus a 96 MiB cache of
// decompressed delta bases that no option changes: several times what the git CLI
// needs for the same repository (ADR 26 and bench/results/fetchcost.json have the
// figures). firstPackStore writes the pack to a temp file as it arrives (the stream
// guard has judged it already) and, once complete, indexes it in two passes over the
// file with go-git's own Scanner, delta patcher and idxfile encoder: one to hash the
// whole objects and note where each delta's base is, one that walks each base's delta
// tree depth first, holding only the contents along the current chain. Per object it
// keeps one packEntry besides go-git's index writer.
//
// Only first mirrors take this path: their pack is complete (no thin pack: there is
// nothing to delta against), and the mirror is not yet visible to anyone.

// firstPackStore is a clone's storage whose PackfileWriter indexes from disk.
type firstPackStore struct {
	*filesystem.Storage
	packDir string // <clone>/objects/pack
}

var _ storer.PackfileWriter = firstPackStore{}

func (s firstPackStore) PackfileWriter() (io.WriteCloser, error) {
	if err := os.MkdirAll(s.packDir, 0o755); err != nil {
		return nil, err
	}
	f, err := os.CreateTemp(s.packDir, "tmp_pack_")
	if err != nil {
		return nil, err
	}
	return &diskPackWriter{f: f, w: bufio.NewWriterSize(f, 1<<16), sto: s.Storage, dir: s.packDir}, nil
}

// diskPackWriter receives a pack into a temp file and indexes it on Close.
type diskPackWriter struct {
	f   *os.File
	w   *bufio.Writer
	n   int64
	sto *filesystem.Storage
	dir string
}

func (p *diskPackWriter) Write(b []byte) (int, error) {
	n, err := p.w.Write(b)
	p.n += int64(n)
	return n, err
}

// Close indexes the pack and moves pack and index into place; on any error the temp
// file is removed.
func (p *diskPackWriter) Close() (err error) {
	tmp := p.f.Name()
	defer func() {
		if err != nil {
			p.f.Close()
			os.Remove(tmp)
		}
	}()
	if err := p.w.Flush(); err != nil {
		return err
	}
	if p.n == 0 {
		// Nothing came (go-git's writer treats an empty pack as no pack).
		p.f.Close()
		return os.Remove(tmp)
	}
	if _, err := p.f.Seek(0, io.SeekStart); err != nil {
		return err
	}
	// Finished (flushed): read in whole blocks (see readBlock), more of them kept than
	// for go-git's reads, as resolving deltas goes back to their bases.
	idx, sum, err := indexPack(newBlockReader(p.f, indexBlocks))
	if err != nil {
		return fmt.Errorf("index pack: %w", err)
	}
	if idx == nil {
		p.f.Close()
		return os.Remove(tmp)
	}
	if err := p.f.Close(); err != nil {
		return err
	}
	base := filepath.Join(p.dir, "pack-"+sum.String())
	if err := writeIdx(base+".idx", idx); err != nil {
		return err
	}
	if err := os.Rename(tmp, base+".pack"); err != nil {
		os.Remove(base + ".idx")
		return err
	}
	p.sto.Reindex() // the object storage reads the new index when next asked
	return nil
}

func writeIdx(path string, idx *idxfile.MemoryIndex) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	w := bufio.NewWriter(f)
	if _, err := idxfile.NewEncoder(w).Encode(idx); err != nil {
		f.Close()
		os.Remove(path)
		return err
	}
	if err := w.Flush(); err != nil {
		f.Close()
		os.Remove(path)
		return err
	}
	return f.Close()
}

// indexBlocks are the blocks of the pack kept while it is indexed (2 MiB).
const indexBlocks = 64

// maxChainDepth bounds a delta chain (git's own default depth is 50, its maximum 4095).
const maxChainDepth = 10_000

const none = int32(-1)

// packEntry is what indexing keeps of one object.
type packEntry struct {
	offset int64
	hash   plumbing.Hash // zero until known (a delta's once resolved)
	crc    uint32
	typ    plumbing.ObjectType // the on-disk type: a delta's is OFS/REF
	base   int32               // OFS delta: index of its base; else none
	child  int32               // first OFS child (a delta against this object); none
	next   int32               // next sibling in the base's child list; none
}

// indexPack indexes the pack in f (at offset 0): it returns the index and the pack's
// checksum, or a nil index for a pack of no objects.
func indexPack(f io.ReadSeeker) (*idxfile.MemoryIndex, plumbing.Hash, error) {
	sc := packfile.NewScanner(f)
	_, count, err := sc.Header()
	if err != nil {
		return nil, plumbing.ZeroHash, err
	}
	if count == 0 {
		return nil, plumbing.ZeroHash, nil
	}
	es := make([]packEntry, count)
	refs := map[plumbing.Hash][]int32{} // REF deltas waiting for their base's hash
	for i := range es {
		oh, err := sc.NextObjectHeader()
		if err != nil {
			return nil, plumbing.ZeroHash, err
		}
		e := &es[i]
		*e = packEntry{offset: oh.Offset, typ: oh.Type, base: none, child: none, next: none}
		var w io.Writer = io.Discard
		var h plumbing.Hasher
		switch oh.Type {
		case plumbing.OFSDeltaObject:
			// Objects come in offset order: the base is found by binary search.
			b := int32(sort.Search(i, func(k int) bool { return es[k].offset >= oh.OffsetReference }))
			if int(b) == i || es[b].offset != oh.OffsetReference {
				return nil, plumbing.ZeroHash, fmt.Errorf("delta at %d: base at %d not found", oh.Offset, oh.OffsetReference)
			}
			e.base = b
			e.next, es[b].child = es[b].child, int32(i)
		case plumbing.REFDeltaObject:
			refs[oh.Reference] = append(refs[oh.Reference], int32(i))
		default:
			h = plumbing.NewHasher(oh.Type, oh.Length)
			w = h
		}
		_, crc, err := sc.NextObject(w)
		if err != nil {
			return nil, plumbing.ZeroHash, err
		}
		e.crc = crc
		if oh.Type != plumbing.OFSDeltaObject && oh.Type != plumbing.REFDeltaObject {
			e.hash = h.Sum()
		}
	}
	sum, err := sc.Checksum() // checks the trailer against the bytes read
	if err != nil {
		return nil, plumbing.ZeroHash, err
	}
	r := &resolver{sc: sc, es: es, refs: refs}
	for i := range es {
		if e := &es[i]; e.typ != plumbing.OFSDeltaObject && e.typ != plumbing.REFDeltaObject && r.hasChildren(int32(i)) {
			content, err := r.read(int32(i))
			if err != nil {
				return nil, plumbing.ZeroHash, err
			}
			if err := r.children(int32(i), e.typ, content, 1); err != nil {
				return nil, plumbing.ZeroHash, err
			}
		}
	}
	if len(r.refs) > 0 {
		for h := range r.refs {
			return nil, plumbing.ZeroHash, fmt.Errorf("delta against %s, which the pack does not hold", h)
		}
	}
	iw := new(idxfile.Writer)
	if err := iw.OnHeader(count); err != nil {
		return nil, plumbing.ZeroHash, err
	}
	for i := range es {
		if es[i].hash.IsZero() {
			return nil, plumbing.ZeroHash, fmt.Errorf("object at %d never resolved", es[i].offset)
		}
		iw.Add(es[i].hash, uint64(es[i].offset), es[i].crc)
	}
	es = nil
	if err := iw.OnFooter(sum); err != nil {
		return nil, plumbing.ZeroHash, err
	}
	idx, err := iw.Index()
	return idx, sum, err
}

// resolver resolves deltas depth first from each base.
type resolver struct {
	sc   *packfile.Scanner
	es   []packEntry
	refs map[plumbing.Hash][]int32
	buf  bytes.Buffer
}

func (r *resolver) hasChildren(i int32) bool {
	if r.es[i].child != none {
		return true
	}
	_, ok := r.refs[r.es[i].hash]
	return ok
}

// read inflates the object at i (its delta data, for a delta).
func (r *resolver) read(i int32) ([]byte, error) {
	if _, err := r.sc.SeekObjectHeader(r.es[i].offset); err != nil {
		return nil, err
	}
	r.buf.Reset()
	if _, _, err := r.sc.NextObject(&r.buf); err != nil {
		return nil, err
	}
	return bytes.Clone(r.buf.Bytes()), nil
}

// children resolves every delta against object i, whose type is typ and content
// content, and theirs in turn.
func (r *resolver) children(i int32, typ plumbing.ObjectType, content []byte, depth int) error {
	if depth > maxChainDepth {
		return fmt.Errorf("delta chain deeper than %d", maxChainDepth)
	}
	var kids []int32
	for c := r.es[i].child; c != none; c = r.es[c].next {
		kids = append(kids, c)
	}
	if refKids, ok := r.refs[r.es[i].hash]; ok {
		delete(r.refs, r.es[i].hash)
		kids = append(kids, refKids...)
	}
	for _, c := range kids {
		delta, err := r.read(c)
		if err != nil {
			return err
		}
		target, err := packfile.PatchDelta(content, delta)
		if err != nil {
			return fmt.Errorf("delta at %d: %w", r.es[c].offset, err)
		}
		h := plumbing.NewHasher(typ, int64(len(target)))
		h.Write(target)
		r.es[c].hash = h.Sum()
		if r.hasChildren(c) {
			if err := r.children(c, typ, target, depth+1); err != nil {
				return err
			}
		}
	}
	return nil
}
