package ring

// Move is an arc of the key space whose owner differs between two rings: hashes h with
// Start < h <= End, wrapping around zero when Start > End. Start == End means the whole
// circle. From or To is "" where that ring is empty.
type Move struct {
	Start, End uint64
	From, To   string
}

// Contains reports whether hash h lies in the arc (Start, End].
func (m Move) Contains(h uint64) bool {
	switch {
	case m.Start < m.End:
		return m.Start < h && h <= m.End
	case m.Start > m.End:
		return h > m.Start || h <= m.End
	default:
		return true
	}
}

// Moved reports the owners of hash h in old and new, and whether they differ.
func Moved(old, new *Ring, h uint64) (from, to string, moved bool) {
	from, _ = old.Owner(h)
	to, _ = new.Owner(h)
	return from, to, from != to
}

// Moves lists the arcs whose owner differs between old and new, in ring order, with
// neighbouring arcs of the same (From, To) joined. It walks both token lists once:
// between two consecutive positions of their union, each ring has a single owner.
func Moves(old, new *Ring) []Move {
	a, b := old.NumTokens(), new.NumTokens()
	if a == 0 && b == 0 {
		return nil
	}
	// Union of the positions, ascending, without duplicates.
	cuts := make([]uint64, 0, a+b)
	for i, j := 0, 0; i < a || j < b; {
		switch {
		case j == b || (i < a && old.pos[i] < new.pos[j]):
			cuts = append(cuts, old.pos[i])
			i++
		case i == a || new.pos[j] < old.pos[i]:
			cuts = append(cuts, new.pos[j])
			j++
		default:
			cuts = append(cuts, old.pos[i])
			i++
			j++
		}
	}
	// The segment (cuts[k-1], cuts[k]] belongs, in each ring, to the first token at or
	// after cuts[k]; the first segment wraps from the last cut.
	var out []Move
	i, j := 0, 0
	start := cuts[len(cuts)-1]
	for _, c := range cuts {
		for i < a && old.pos[i] < c {
			i++
		}
		for j < b && new.pos[j] < c {
			j++
		}
		from, to := ownerAt(old, i), ownerAt(new, j)
		if from != to {
			if n := len(out); n > 0 && out[n-1].End == start && out[n-1].From == from && out[n-1].To == to {
				out[n-1].End = c
			} else {
				out = append(out, Move{Start: start, End: c, From: from, To: to})
			}
		}
		start = c
	}
	// Join the last arc with the first across the wrap point; a single arc spanning every
	// segment already has Start == End (the whole circle).
	if n := len(out); n > 1 && out[n-1].End == out[0].Start && out[n-1].From == out[0].From && out[n-1].To == out[0].To {
		out[0].Start = out[n-1].Start
		out = out[:n-1]
	}
	return out
}

// ownerAt returns the owner of token i of r, wrapping past the last token; "" if empty.
func ownerAt(r *Ring, i int) string {
	if r.NumTokens() == 0 {
		return ""
	}
	if i == len(r.pos) {
		i = 0
	}
	return r.members[r.owner[i]].ID
}

// Span is a range of positions [From, To] owned by one member.
type Span struct {
	From, To uint64
	Owner    string
}

// Spans returns who owns the positions [from, to] (from <= to), in order, neighbouring
// positions of one owner in one span. It is nil for an empty ring.
func (r *Ring) Spans(from, to uint64) []Span {
	if r.NumTokens() == 0 || from > to {
		return nil
	}
	var out []Span
	lo, i := from, r.search(from)
	for {
		end := r.pos[i]
		if end < lo {
			end = ^uint64(0) // past the last token: the first one owns the rest of the circle
		}
		end = min(end, to)
		owner := r.members[r.owner[i]].ID
		if n := len(out); n > 0 && out[n-1].Owner == owner {
			out[n-1].To = end
		} else {
			out = append(out, Span{From: lo, To: end, Owner: owner})
		}
		if end == to {
			return out
		}
		lo = end + 1
		if i++; i == len(r.pos) {
			i = 0
		}
	}
}
