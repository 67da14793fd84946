package main

import (
	"encoding/json"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// The DynamoDB JSON wire format, read back into SDK attribute values so that one size
// function serves items seen on the wire and items read through the SDK.

type wireItem = map[string]json.RawMessage

// decodeItem turns a wire item ({"a":{"S":"x"},...}) into SDK attribute values.
func decodeItem(raw wireItem) (map[string]types.AttributeValue, error) {
	if raw == nil {
		return nil, nil
	}
	out := make(map[string]types.AttributeValue, len(raw))
	for k, v := range raw {
		av, err := decodeValue(v)
		if err != nil {
			return nil, fmt.Errorf("attribute %s: %w", k, err)
		}
		out[k] = av
	}
	return out, nil
}

func decodeValue(raw json.RawMessage) (types.AttributeValue, error) {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(raw, &m); err != nil {
		return nil, fmt.Errorf("attribute value: %w", err)
	}
	if len(m) != 1 {
		return nil, fmt.Errorf("attribute value with %d types", len(m))
	}
	for typ, v := range m {
		switch typ {
		case "S":
			var s string
			err := json.Unmarshal(v, &s)
			return &types.AttributeValueMemberS{Value: s}, err
		case "N":
			var s string
			err := json.Unmarshal(v, &s)
			return &types.AttributeValueMemberN{Value: s}, err
		case "B":
			var b []byte // base64 on the wire
			err := json.Unmarshal(v, &b)
			return &types.AttributeValueMemberB{Value: b}, err
		case "BOOL":
			var b bool
			err := json.Unmarshal(v, &b)
			return &types.AttributeValueMemberBOOL{Value: b}, err
		case "NULL":
			return &types.AttributeValueMemberNULL{Value: true}, nil
		case "SS", "NS":
			var ss []string
			if err := json.Unmarshal(v, &ss); err != nil {
				return nil, err
			}
			if typ == "SS" {
				return &types.AttributeValueMemberSS{Value: ss}, nil
			}
			return &types.AttributeValueMemberNS{Value: ss}, nil
		case "BS":
			var bs [][]byte
			err := json.Unmarshal(v, &bs)
			return &types.AttributeValueMemberBS{Value: bs}, err
		case "L":
			var l []json.RawMessage
			if err := json.Unmarshal(v, &l); err != nil {
				return nil, err
			}
			out := make([]types.AttributeValue, len(l))
			for i, e := range l {
				av, err := decodeValue(e)
				if err != nil {
					return nil, err
				}
				out[i] = av
			}
			return &types.AttributeValueMemberL{Value: out}, nil
		case "M":
			var mm wireItem
			if err := json.Unmarshal(v, &mm); err != nil {
				return nil, err
			}
			it, err := decodeItem(mm)
			if err != nil {
				return nil, err
			}
			if it == nil {
				it = map[string]types.AttributeValue{}
			}
			return &types.AttributeValueMemberM{Value: it}, nil
		default:
			return nil, fmt.Errorf("unknown attribute type %q", typ)
		}
	}
	return nil, nil
}

// Request and response shapes, only the fields the meter needs.

type keysAndAttrs struct {
	Keys           []wireItem `json:"Keys"`
	ConsistentRead bool       `json:"ConsistentRead"`
}

type request struct {
	TableName      string                    `json:"TableName"`
	Key            wireItem                  `json:"Key"`
	Item           wireItem                  `json:"Item"`
	IndexName      string                    `json:"IndexName"`
	ConsistentRead bool                      `json:"ConsistentRead"`
	Projection     string                    `json:"ProjectionExpression"`
	RequestItems   json.RawMessage           `json:"RequestItems"` // BatchGetItem or BatchWriteItem
	TransactItems  []transactItem            `json:"TransactItems"`
	batchGet       map[string]keysAndAttrs   // decoded RequestItems of a BatchGetItem
	batchWrite     map[string][]writeRequest // decoded RequestItems of a BatchWriteItem
}

type keyed struct {
	Key  wireItem `json:"Key"`
	Item wireItem `json:"Item"`
}

type transactItem struct {
	ConditionCheck *keyed `json:"ConditionCheck"`
	Put            *keyed `json:"Put"`
	Update         *keyed `json:"Update"`
	Delete         *keyed `json:"Delete"`
}

// key is the key of the transaction's one action.
func (t transactItem) key() wireItem {
	for _, k := range []*keyed{t.ConditionCheck, t.Put, t.Update, t.Delete} {
		if k != nil {
			if k.Key != nil {
				return k.Key
			}
			return k.Item
		}
	}
	return nil
}

type writeRequest struct {
	PutRequest    *keyed `json:"PutRequest"`
	DeleteRequest *keyed `json:"DeleteRequest"`
}

func (w writeRequest) key() wireItem {
	if w.PutRequest != nil {
		return w.PutRequest.Item
	}
	if w.DeleteRequest != nil {
		return w.DeleteRequest.Key
	}
	return nil
}

type response struct {
	Item             wireItem                  `json:"Item"`
	Items            []wireItem                `json:"Items"`
	Responses        map[string][]wireItem     `json:"Responses"`
	UnprocessedKeys  map[string]keysAndAttrs   `json:"UnprocessedKeys"`
	UnprocessedItems map[string][]writeRequest `json:"UnprocessedItems"`
}

// decodeRequest parses a request body for api.
func decodeRequest(api string, body []byte) (request, error) {
	var r request
	if len(body) == 0 {
		return r, nil
	}
	if err := json.Unmarshal(body, &r); err != nil {
		return r, fmt.Errorf("%s request: %w", api, err)
	}
	switch api {
	case "BatchGetItem":
		if err := json.Unmarshal(r.RequestItems, &r.batchGet); err != nil {
			return r, fmt.Errorf("%s request items: %w", api, err)
		}
	case "BatchWriteItem":
		if err := json.Unmarshal(r.RequestItems, &r.batchWrite); err != nil {
			return r, fmt.Errorf("%s request items: %w", api, err)
		}
	}
	return r, nil
}
