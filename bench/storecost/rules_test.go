package main

import (
	"encoding/json"
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

func TestNumberSize(t *testing.T) {
	for _, c := range []struct {
		n    string
		want int
	}{
		{"0", 1}, {"7", 2}, {"42", 2}, {"123", 3}, {"1000", 2}, {"-12.50", 3}, {"0.001", 2}, {"1.5e10", 2},
		{"12345678901234567890", 11},
	} {
		if got := numberSize(c.n); got != c.want {
			t.Errorf("numberSize(%q) = %d, want %d", c.n, got, c.want)
		}
	}
}

func TestItemSize(t *testing.T) {
	it := map[string]types.AttributeValue{
		"pk": &types.AttributeValueMemberS{Value: "REPO#abc"}, // 2 + 8
		"n":  &types.AttributeValueMemberN{Value: "42"},       // 1 + 2
		"b":  &types.AttributeValueMemberBOOL{Value: true},    // 1 + 1
		"l": &types.AttributeValueMemberL{Value: []types.AttributeValue{ // 1 + 3 + (1+2) + (1+2)
			&types.AttributeValueMemberS{Value: "ab"}, &types.AttributeValueMemberN{Value: "1"}}},
		"bin": &types.AttributeValueMemberB{Value: []byte{1, 2, 3, 4}}, // 3 + 4
	}
	if got, want := itemSize(it), 10+3+2+10+7; got != want {
		t.Errorf("itemSize = %d, want %d", got, want)
	}
}

func TestDecodeItemFromTheWire(t *testing.T) {
	var raw wireItem
	if err := json.Unmarshal([]byte(`{"pk":{"S":"x"},"n":{"N":"12"},"b":{"B":"AAEC"},"m":{"M":{"k":{"BOOL":true}}},"ss":{"SS":["ab","c"]},"z":{"NULL":true}}`), &raw); err != nil {
		t.Fatal(err)
	}
	it, err := decodeItem(raw)
	if err != nil {
		t.Fatal(err)
	}
	// pk 2+1, n 1+2, b 1+3 (base64 AAEC is 3 bytes), m 1+3+(1+1+1), ss 2+3, z 1+1
	if got, want := itemSize(it), 3+3+4+7+5+2; got != want {
		t.Errorf("size of the decoded item = %d, want %d", got, want)
	}
	if _, err := decodeValue(json.RawMessage(`{"X":"1"}`)); err == nil {
		t.Error("an unknown attribute type decoded without error")
	}
}

func TestUnitRules(t *testing.T) {
	for _, c := range []struct {
		name string
		got  float64
		want float64
	}{
		{"write of a 500 B item growing to 1500 B", writeUnits(500, 1500, false), 2},
		{"put of a new 100 B item", writeUnits(0, 100, false), 1},
		{"delete of a missing item", writeUnits(0, 0, false), 1},
		{"transactional write of 1 KB", writeUnits(1024, 1024, true), 2},
		{"transactional write just over 1 KB", writeUnits(1025, 0, true), 4},
		{"consistent reads of a missing, a 4 KB and a 4 KB+1 item", readUnits([]int{0, 4096, 4097}, true), 4},
		{"eventually consistent reads of the same", readUnits([]int{0, 4096, 4097}, false), 2},
		{"index query page of 9000 B", queryUnits(9000, false), 1.5},
		{"empty consistent query page", queryUnits(0, true), 1},
	} {
		if c.got != c.want {
			t.Errorf("%s: %g, want %g", c.name, c.got, c.want)
		}
	}
}

func s(v string) types.AttributeValue { return &types.AttributeValueMemberS{Value: v} }

var testIndexes = []gsi{{Name: "by_owner", PK: "g_owner", SK: "id"}, {Name: "needs_decision", PK: "g_need", SK: "id"}}

func TestIndexWrites(t *testing.T) {
	keys := []string{"pk", "sk"}
	base := func(extra map[string]types.AttributeValue) map[string]types.AttributeValue {
		it := map[string]types.AttributeValue{"pk": s("REPO#1"), "sk": s("#"), "id": s("1"), "state": s("ok")}
		for k, v := range extra {
			it[k] = v
		}
		return it
	}
	pending := base(map[string]types.AttributeValue{"g_need": s("N")})
	ownedA := base(map[string]types.AttributeValue{"g_owner": s("a")})
	ownedB := base(map[string]types.AttributeValue{"g_owner": s("b")})
	touched := base(map[string]types.AttributeValue{"g_owner": s("a"), "state": s("failing")})
	for _, c := range []struct {
		name          string
		before, after map[string]types.AttributeValue
		want          float64
	}{
		{"create a pending repo", nil, pending, 1},
		{"assign: leaves needs_decision, enters by_owner", pending, ownedA, 2},
		{"move: owner key changes", ownedA, ownedB, 2},
		{"non-key change", ownedA, touched, 0},
		{"delete", ownedA, nil, 1},
		{"absent before and after", nil, nil, 0},
	} {
		if got := indexWrites(c.before, c.after, testIndexes, keys); got != c.want {
			t.Errorf("%s: %g index WRU, want %g", c.name, got, c.want)
		}
	}
}

// The meter's write cost: each touched key by the larger of its sizes, doubled in a
// transaction, plus the index entries that moved.
func TestMeterWriteCost(t *testing.T) {
	m := &meter{tableKeys: []string{"pk", "sk"}, indexes: testIndexes}
	key := func(pk string) wireItem {
		return wireItem{"pk": json.RawMessage(`{"S":"` + pk + `"}`), "sk": json.RawMessage(`{"S":"#"}`)}
	}
	big := map[string]types.AttributeValue{"pk": s("REPO#2"), "sk": s("#"), "blob": &types.AttributeValueMemberB{Value: make([]byte, 1500)}}
	before := map[string]map[string]types.AttributeValue{
		m.keyString(key("REPO#1")): {"pk": s("REPO#1"), "sk": s("#"), "id": s("1"), "g_need": s("N")},
		m.keyString(key("REPO#2")): big,
	}
	after := map[string]map[string]types.AttributeValue{
		m.keyString(key("REPO#1")): {"pk": s("REPO#1"), "sk": s("#"), "id": s("1"), "g_owner": s("a")},
		m.keyString(key("REPO#2")): big, // a ConditionCheck: unchanged
	}
	keys := []wireItem{key("REPO#1"), key("REPO#2")}
	wcu, idx := m.writeCost("TransactWriteItems", keys, before, after)
	// REPO#1: 2 × 1 KB; REPO#2: 2 × 2 KB (1500 B + names); index: needs_decision out, by_owner in.
	if wcu != 6 || idx != 2 {
		t.Errorf("transaction: %g WRU + %g index WRU, want 6 + 2", wcu, idx)
	}
	wcu, idx = m.writeCost("UpdateItem", keys[:1], before, after)
	if wcu != 1 || idx != 2 {
		t.Errorf("update: %g WRU + %g index WRU, want 1 + 2", wcu, idx)
	}
}
