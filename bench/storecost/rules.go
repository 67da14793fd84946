package main

import (
	"math"
	"strings"
	"unicode/utf8"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// AWS's on-demand billing rules, applied to item sizes the meter observes. DynamoDB
// Local charges single-item calls by these rules too, but a transaction a flat amount,
// so the bill uses these figures, not the emulator's.

// billingRules is what the AWS-rule figures assume, for the report.
var billingRules = []string{
	"Item size: attribute name bytes + value bytes (string: UTF-8 bytes; number: 1 byte per 2 significant digits + 1; binary: raw bytes; bool/null: 1; list/map: 3 + 1 per element + elements).",
	"Write (PutItem, UpdateItem, DeleteItem, each BatchWriteItem request): 1 WRU per started KB of the larger of the item before and after; at least 1.",
	"Transactional write (each TransactWriteItems action, ConditionCheck included): 2 WRU per started KB of the item.",
	"Strongly consistent read: 1 RRU per started 4 KB; GetItem and each BatchGetItem key alone (a missing item costs the minimum); a Query page on the sum of its items (full items, whatever the projection).",
	"Eventually consistent read (every GSI Query): half of the above, on the sum of the index entries (table keys + index keys for KEYS_ONLY).",
	"Each GSI entry put or deleted: 1 WRU per started KB; a changed index key is a delete plus a put (2); an update that leaves a KEYS_ONLY entry's keys alone writes nothing to the index.",
	"A write whose condition fails still costs its units (the item is charged at its current size); a canceled transaction is charged for every action.",
}

// itemSize is an item's size by AWS's rules.
func itemSize(it map[string]types.AttributeValue) int {
	n := 0
	for name, v := range it {
		n += len(name) + valueSize(v)
	}
	return n
}

// valueSize is the size of one attribute value, without its name.
func valueSize(v types.AttributeValue) int {
	switch v := v.(type) {
	case *types.AttributeValueMemberS:
		return len(v.Value)
	case *types.AttributeValueMemberN:
		return numberSize(v.Value)
	case *types.AttributeValueMemberB:
		return len(v.Value)
	case *types.AttributeValueMemberBOOL, *types.AttributeValueMemberNULL:
		return 1
	case *types.AttributeValueMemberSS:
		return sumSizes(v.Value, func(s string) int { return len(s) })
	case *types.AttributeValueMemberNS:
		return sumSizes(v.Value, numberSize)
	case *types.AttributeValueMemberBS:
		return sumSizes(v.Value, func(b []byte) int { return len(b) })
	case *types.AttributeValueMemberL:
		n := 3
		for _, e := range v.Value {
			n += 1 + valueSize(e)
		}
		return n
	case *types.AttributeValueMemberM:
		n := 3
		for k, e := range v.Value {
			n += 1 + len(k) + valueSize(e)
		}
		return n
	}
	return 0
}

// numberSize: 1 byte per two significant digits, plus 1. Sign, point, exponent and
// leading or trailing zeros are not significant.
func numberSize(s string) int {
	if i := strings.IndexAny(s, "eE"); i >= 0 {
		s = s[:i]
	}
	s = strings.TrimLeft(s, "+-")
	s = strings.ReplaceAll(s, ".", "")
	s = strings.Trim(s, "0")
	digits := utf8.RuneCountInString(s)
	return (digits+1)/2 + 1
}

const (
	readUnitBytes  = 4096
	writeUnitBytes = 1024
)

// readUnits is what reading items of the given sizes one by one costs (GetItem, each
// BatchGetItem key); a size of 0 is a missing item, which costs the minimum.
func readUnits(sizes []int, consistent bool) float64 {
	u := 0.0
	for _, s := range sizes {
		u += math.Max(1, math.Ceil(float64(s)/readUnitBytes))
	}
	if !consistent {
		u /= 2
	}
	return u
}

// queryUnits is what one Query page returning items of total size bytes costs.
func queryUnits(total int, consistent bool) float64 {
	u := math.Max(1, math.Ceil(float64(total)/readUnitBytes))
	if !consistent {
		u /= 2
	}
	return u
}

// writeUnits is what writing one item costs, from its size before and after (0: absent).
func writeUnits(before, after int, transactional bool) float64 {
	u := math.Max(1, math.Ceil(float64(max(before, after))/writeUnitBytes))
	if transactional {
		u *= 2
	}
	return u
}

// gsi names a global secondary index by its key attributes.
type gsi struct {
	Name, PK, SK string
}

// entry is the index entry an item has in g (a KEYS_ONLY projection: the table's keys
// and the index's), or nil when the item is absent from the sparse index.
func (g gsi) entry(it map[string]types.AttributeValue, tableKeys []string) map[string]types.AttributeValue {
	if it == nil {
		return nil
	}
	pk, ok1 := it[g.PK]
	sk, ok2 := it[g.SK]
	if !ok1 || (g.SK != "" && !ok2) {
		return nil
	}
	e := map[string]types.AttributeValue{g.PK: pk}
	if g.SK != "" {
		e[g.SK] = sk
	}
	for _, k := range tableKeys {
		if v, ok := it[k]; ok {
			e[k] = v
		}
	}
	return e
}

// indexWrites is what an item's change from before to after (nil: absent) costs in the
// indexes: a new or removed entry 1 WRU per KB, a moved one both.
func indexWrites(before, after map[string]types.AttributeValue, idx []gsi, tableKeys []string) float64 {
	u := 0.0
	for _, g := range idx {
		b, a := g.entry(before, tableKeys), g.entry(after, tableKeys)
		switch {
		case b == nil && a == nil:
		case b == nil:
			u += writeUnits(0, itemSize(a), false)
		case a == nil:
			u += writeUnits(itemSize(b), 0, false)
		case !sameKeys(b, a, g):
			u += writeUnits(itemSize(b), 0, false) + writeUnits(0, itemSize(a), false)
		}
	}
	return u
}

func sameKeys(a, b map[string]types.AttributeValue, g gsi) bool {
	return scalar(a[g.PK]) == scalar(b[g.PK]) && scalar(a[g.SK]) == scalar(b[g.SK])
}

// scalar is a key attribute's value as text (keys are strings, numbers or binary).
func scalar(v types.AttributeValue) string {
	switch v := v.(type) {
	case *types.AttributeValueMemberS:
		return "S" + v.Value
	case *types.AttributeValueMemberN:
		return "N" + v.Value
	case *types.AttributeValueMemberB:
		return "B" + string(v.Value)
	}
	return ""
}

// sumSizes is the size of a set: the sum of its members' sizes.
func sumSizes[T any](set []T, size func(T) int) int {
	n := 0
	for _, x := range set {
		n += size(x)
	}
	return n
}
