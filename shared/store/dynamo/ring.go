package dynamo

import (
	"bytes"
	"compress/flate"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"sync"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/mirrorfleet/mirrorfleet/shared/store"
)

// The ring is stored as a head item (version, hash id, warm-up, batch, scans, and either
// the encoded members+tokens inline or a pointer to chunk items) so that a 1000-member
// ring (≈ 62k tokens, 2.7 MB as JSON) fits DynamoDB's 400 KB items:
//
//   - members and tokens are encoded compactly (ringBlob: a string table, then each
//     token as a varint position delta and a varint member index — about 9 bytes a
//     token) and deflated;
//   - a blob of at most inlineRingBytes rides in the head, written in the Apply
//     transaction;
//   - a larger blob is cut into chunkBytes pieces written *before* the transaction with
//     BatchWriteItem under keys "CHUNK#<version>#<nonce>#<i>" that no head points to yet.
//     The transaction then writes only the head (version, nonce, chunk count, SHA-256,
//     and the version the chunks were written at). A stale or losing writer's chunks are
//     never referenced, and are deleted after the next successful ring write. Readers
//     read the head, then its chunks, both strongly consistent, and start over if a chunk
//     has gone (a newer ring replaced it);
//   - a ring whose members and tokens did not change (a new batch size, scans done)
//     points its new head at the chunks already stored: only the head is written.
//
// So a PutRing is always one action of the transaction, whatever the ring's size.

const (
	inlineRingBytes = 48 << 10
	chunkBytes      = 300 << 10

	hVersion, hHash, hWarmup, hBatch = "version", "hash", "warmup", "batch"
	hBlob, hChunks, hNonce, hSum     = "blob", "chunks", "nonce", "sum"
	hChunkVersion, hScans            = "cver", "scans" // cver absent: the head's own version
	cData                            = "data"
	ringFormat                       = 1
)

// encodeRing returns the deflated binary form of the ring's members and tokens.
func encodeRing(r store.Ring) ([]byte, error) {
	var raw []byte
	raw = append(raw, ringFormat)
	index := map[string]uint64{}
	var table []string
	intern := func(s string) uint64 {
		i, ok := index[s]
		if !ok {
			i = uint64(len(table))
			index[s] = i
			table = append(table, s)
		}
		return i
	}
	for _, m := range r.Members {
		intern(m.ID)
	}
	for _, t := range r.Tokens {
		intern(t.Member)
	}
	raw = binary.AppendUvarint(raw, uint64(len(table)))
	for _, s := range table {
		raw = binary.AppendUvarint(raw, uint64(len(s)))
		raw = append(raw, s...)
	}
	raw = binary.AppendUvarint(raw, uint64(len(r.Members)))
	for _, m := range r.Members {
		raw = binary.AppendUvarint(raw, index[m.ID])
		raw = binary.AppendVarint(raw, int64(m.Slot))
	}
	raw = binary.AppendUvarint(raw, uint64(len(r.Tokens)))
	var prev uint64
	for _, t := range r.Tokens {
		raw = binary.AppendUvarint(raw, t.Pos-prev) // tokens are sorted: small deltas (wraps otherwise, still exact)
		raw = binary.AppendUvarint(raw, index[t.Member])
		prev = t.Pos
	}
	var buf bytes.Buffer
	w, err := flate.NewWriter(&buf, flate.BestSpeed)
	if err != nil {
		return nil, err
	}
	if _, err := w.Write(raw); err != nil {
		return nil, err
	}
	if err := w.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// decodeRing fills r's members and tokens from blob.
func decodeRing(blob []byte, r *store.Ring) error {
	raw, err := io.ReadAll(flate.NewReader(bytes.NewReader(blob)))
	if err != nil {
		return fmt.Errorf("dynamo: inflate ring: %w", err)
	}
	rd := bytes.NewReader(raw)
	bad := func(what string, err error) error { return fmt.Errorf("dynamo: decode ring %s: %w", what, err) }
	f, err := rd.ReadByte()
	if err != nil || f != ringFormat {
		return bad("format", fmt.Errorf("format byte %d, %v", f, err))
	}
	n, err := binary.ReadUvarint(rd)
	if err != nil || n > uint64(len(raw)) {
		return bad("string table", err)
	}
	table := make([]string, n)
	for i := range table {
		l, err := binary.ReadUvarint(rd)
		if err != nil || l > uint64(rd.Len()) {
			return bad("string", err)
		}
		b := make([]byte, l)
		if _, err := io.ReadFull(rd, b); err != nil {
			return bad("string", err)
		}
		table[i] = string(b)
	}
	str := func(i uint64) (string, error) {
		if i >= uint64(len(table)) {
			return "", errors.New("index out of range")
		}
		return table[i], nil
	}
	n, err = binary.ReadUvarint(rd)
	if err != nil || n > uint64(len(raw)) {
		return bad("members", err)
	}
	r.Members = make([]store.Member, n)
	for i := range r.Members {
		idx, err := binary.ReadUvarint(rd)
		if err != nil {
			return bad("member", err)
		}
		slot, err := binary.ReadVarint(rd)
		if err != nil {
			return bad("member slot", err)
		}
		id, err := str(idx)
		if err != nil {
			return bad("member", err)
		}
		r.Members[i] = store.Member{ID: id, Slot: int(slot)}
	}
	n, err = binary.ReadUvarint(rd)
	if err != nil || n > uint64(len(raw)) {
		return bad("tokens", err)
	}
	r.Tokens = make([]store.Token, n)
	var prev uint64
	for i := range r.Tokens {
		d, err := binary.ReadUvarint(rd)
		if err != nil {
			return bad("token", err)
		}
		idx, err := binary.ReadUvarint(rd)
		if err != nil {
			return bad("token member", err)
		}
		m, err := str(idx)
		if err != nil {
			return bad("token member", err)
		}
		prev += d
		r.Tokens[i] = store.Token{Pos: prev, Member: m}
	}
	if rd.Len() != 0 {
		return bad("tail", fmt.Errorf("%d bytes left", rd.Len()))
	}
	return nil
}

func chunkPrefix(version int64, nonce string) string {
	return fmt.Sprintf("%s%020d#%s#", skChunkPre, version, nonce)
}

// ringWrite is a prepared PutRing: the encoded members and tokens, and the chunks they
// need unless inline or already stored.
type ringWrite struct {
	blob    []byte
	sum     [32]byte
	nonce   string // of the chunks below, once cut
	chunks  []item
	written bool // the chunks are in the table
}

func prepareRing(r store.Ring) (*ringWrite, error) {
	blob, err := encodeRing(r)
	if err != nil {
		return nil, fmt.Errorf("dynamo: encode ring: %w", err)
	}
	return &ringWrite{blob: blob, sum: sha256.Sum256(blob)}, nil
}

// head returns the head item of r at version. stored is the head it replaces (nil if
// none): chunks it points to that hold the same blob are pointed to again. fresh is set
// when the head needs rw's own chunks, cut here once.
func (rw *ringWrite) head(r store.Ring, version int64, stored item) (head item, fresh bool, err error) {
	head = ringHeadKey()
	head[hVersion] = avN(version)
	head[hHash] = avS(r.Hash)
	head[hWarmup] = avT(r.WarmupUntil)
	head[hBatch] = avN(int64(r.Batch))
	if len(r.Scans) > 0 {
		raw, err := json.Marshal(r.Scans)
		if err != nil {
			return nil, false, fmt.Errorf("dynamo: encode ring scans: %w", err)
		}
		head[hScans] = avB(raw)
	}
	if len(rw.blob) <= inlineRingBytes {
		head[hBlob] = avB(rw.blob)
		return head, false, nil
	}
	if stored != nil && getNum(stored, hChunks) != "" && bytes.Equal(getB(stored, hSum), rw.sum[:]) {
		for _, a := range []string{hChunks, hNonce, hSum} {
			head[a] = stored[a]
		}
		head[hChunkVersion] = avN(chunkVersion(stored))
		return head, false, nil
	}
	if rw.nonce == "" {
		var nb [8]byte
		if _, err := rand.Read(nb[:]); err != nil {
			return nil, false, err
		}
		rw.nonce = hex.EncodeToString(nb[:])
		prefix := chunkPrefix(version, rw.nonce)
		for i, blob := 0, rw.blob; len(blob) > 0; i++ {
			n := min(len(blob), chunkBytes)
			c := key(pkRing, fmt.Sprintf("%s%06d", prefix, i))
			c[cData] = avB(blob[:n])
			rw.chunks = append(rw.chunks, c)
			blob = blob[n:]
		}
	}
	head[hChunks] = avN(int64(len(rw.chunks)))
	head[hNonce] = avS(rw.nonce)
	head[hSum] = avB(rw.sum[:])
	head[hChunkVersion] = avN(version)
	return head, true, nil
}

// chunkVersion is the version a chunked head's chunks were written at.
func chunkVersion(head item) int64 {
	d := decoder{what: "ring head", m: head}
	if getNum(head, hChunkVersion) != "" {
		return d.i64(hChunkVersion)
	}
	return d.i64(hVersion)
}

func joinChunks(chunks []item) []byte {
	var b []byte
	for _, c := range chunks {
		b = append(b, getB(c, cData)...)
	}
	return b
}

func putRequests(items []item) []types.WriteRequest {
	reqs := make([]types.WriteRequest, len(items))
	for i, it := range items {
		reqs[i] = types.WriteRequest{PutRequest: &types.PutRequest{Item: it}}
	}
	return reqs
}

// errRingMoved: the chunks of the head just read are gone; a newer ring replaced it.
var errRingMoved = errors.New("ring chunks replaced while reading")

func (s *Store) GetRing(ctx context.Context) (store.Ring, error) {
	for attempt := 0; ; attempt++ {
		r, err := s.readRing(ctx)
		if !errors.Is(err, errRingMoved) || attempt >= maxAttempts {
			return r, err
		}
	}
}

// GetRingHead reads the head item alone: one small GetItem.
func (s *Store) GetRingHead(ctx context.Context) (store.Ring, error) {
	head, err := s.getItem(ctx, "GetRingHead", ringHeadKey())
	if err != nil || head == nil {
		return store.Ring{}, err
	}
	return decodeHead(head)
}

func decodeHead(head item) (store.Ring, error) {
	d := decoder{what: "ring head", m: head}
	r := store.Ring{
		Version:     d.i64(hVersion),
		Hash:        d.s(hHash),
		WarmupUntil: d.t(hWarmup),
		Batch:       int(d.i64(hBatch)),
	}
	if d.err != nil {
		return store.Ring{}, d.err
	}
	if raw := getB(head, hScans); len(raw) > 0 {
		if err := json.Unmarshal(raw, &r.Scans); err != nil {
			return store.Ring{}, fmt.Errorf("dynamo: decode ring scans: %w", err)
		}
	}
	return r, nil
}

func (s *Store) readRing(ctx context.Context) (store.Ring, error) {
	head, err := s.getItem(ctx, "GetRing", ringHeadKey())
	if err != nil || head == nil {
		return store.Ring{}, err
	}
	r, err := decodeHead(head)
	if err != nil {
		return store.Ring{}, err
	}
	d := decoder{what: "ring head", m: head}
	nchunks := d.i64(hChunks)
	if d.err != nil {
		return store.Ring{}, d.err
	}
	blob := getB(head, hBlob)
	nonce, cver := getS(head, hNonce), chunkVersion(head)
	if nchunks > 0 {
		if b, ok := s.cachedBody(cver, nonce); ok {
			r.Members, r.Tokens = b.Members, b.Tokens
			return r, nil
		}
		var chunks []item
		err := s.queryAll(ctx, "GetRing", beginsWith(pkRing, chunkPrefix(cver, nonce)), func(it item) error {
			chunks = append(chunks, it)
			return nil
		})
		if err != nil {
			return store.Ring{}, err
		}
		blob = joinChunks(chunks)
		if sum := sha256.Sum256(blob); int64(len(chunks)) != nchunks || !bytes.Equal(sum[:], getB(head, hSum)) {
			return store.Ring{}, fmt.Errorf("dynamo: ring version %d: %d of %d chunks: %w", r.Version, len(chunks), nchunks, errRingMoved)
		}
	}
	if err := decodeRing(blob, &r); err != nil {
		return store.Ring{}, err
	}
	if nchunks > 0 {
		s.cacheBody(cver, nonce, r)
	}
	return r, nil
}

// ringCache keeps the members and tokens of the last chunked ring read or written by
// this Store: a coordinator reads the ring every tick and it rarely changes, so a warm
// process pays for the head (one small GetItem) instead of every chunk. Chunks with
// their version and nonce never change content, so the cache is never stale; it is only
// ever behind, and the head read tells.
type ringCache struct {
	mu      sync.Mutex
	version int64 // of the chunks
	nonce   string
	members []store.Member
	tokens  []store.Token
}

// cachedBody returns copies: callers own what they get.
func (s *Store) cachedBody(version int64, nonce string) (store.Ring, bool) {
	s.ring.mu.Lock()
	defer s.ring.mu.Unlock()
	if s.ring.nonce == "" || s.ring.version != version || s.ring.nonce != nonce {
		return store.Ring{}, false
	}
	return store.Ring{Members: slices.Clone(s.ring.members), Tokens: slices.Clone(s.ring.tokens)}, true
}

func (s *Store) cacheBody(version int64, nonce string, r store.Ring) {
	s.ring.mu.Lock()
	defer s.ring.mu.Unlock()
	s.ring.version, s.ring.nonce = version, nonce
	s.ring.members, s.ring.tokens = slices.Clone(r.Members), slices.Clone(r.Tokens)
}

// writeChunks stores a prepared ring's chunks ahead of its transaction.
func (s *Store) writeChunks(ctx context.Context, rw *ringWrite) error {
	return s.batchWrite(ctx, "Apply/PutRing", putRequests(rw.chunks))
}

// sweepChunks deletes the chunks of versions older than version, the version of the
// chunks the head now points to: no head will point to older ones again (superseded
// rings, and the losers of races for older versions). Chunks of this version or newer
// may belong to a write in flight and are kept for the next sweep.
// A reader still reading an older head notices its chunks are gone and starts over.
func (s *Store) sweepChunks(ctx context.Context, version int64) {
	s.deleteMatching(ctx, "Apply/PutRing", between(pkRing, skChunkPre, fmt.Sprintf("%s%020d", skChunkPre, version)), nil)
}

// dropChunks deletes the chunks of a ring write whose transaction did not commit.
func (s *Store) dropChunks(ctx context.Context, rw *ringWrite) {
	if len(rw.chunks) == 0 {
		return
	}
	var keys []item
	for _, c := range rw.chunks {
		keys = append(keys, key(getS(c, attrPK), getS(c, attrSK)))
	}
	if err := s.batchWrite(ctx, "Apply/PutRing", deleteRequests(keys)); err != nil {
		s.cfg.Log.Warn("dynamo: dropping unused ring chunks failed; the next ring write sweeps them", "err", err)
	}
}
