package cfnschema

import (
	"bytes"
	"compress/gzip"
	"strings"
	"testing"
)

// A specification in db.json.gz's layout, of two resource types.
const smallDB = `{"idCtr":3,"schema":{
 "resource":{"type":"entities","entities":[
  {"$id":"0","cloudFormationType":"AWS::Lambda::Function","properties":{
    "MemorySize":{"type":{"type":"integer"}},
    "Timeout":{"type":{"type":"integer"}},
    "Role":{"type":{"type":"string"},"required":true},
    "Architectures":{"type":{"type":"array","element":{"type":"string"}}},
    "Environment":{"type":{"type":"ref","reference":{"$ref":"1"}}},
    "Tags":{"type":{"type":"array","element":{"type":"tag"}}},
    "Code":{"type":{"type":"union","types":[{"type":"string"},{"type":"ref","reference":{"$ref":"2"}}]}},
    "Old":{"type":{"type":"ref","reference":{"$ref":"2"}},"previousTypes":[{"type":"string"}]}}},
  {"$id":"3","cloudFormationType":"AWS::CloudWatch::Alarm","properties":{
    "TreatMissingData":{"type":{"type":"string","allowedValues":["breaching","notBreaching","ignore","missing"]}},
    "Threshold":{"type":{"type":"number"}},
    "ActionsEnabled":{"type":{"type":"boolean"}}}}]},
 "typeDefinition":{"type":"entities","entities":[
  {"$id":"1","name":"Environment","properties":{"Variables":{"type":{"type":"map","element":{"type":"string"}}}}},
  {"$id":"2","name":"Code","properties":{"S3Bucket":{"type":{"type":"string"}},"S3Key":{"type":{"type":"string"},"required":true}}}]}}}`

func smallSpec(t *testing.T) *Spec {
	t.Helper()
	var b bytes.Buffer
	zw := gzip.NewWriter(&b)
	zw.Write([]byte(smallDB))
	zw.Close()
	s, err := Load(&b)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestValidTemplatePasses(t *testing.T) {
	s := smallSpec(t)
	tpl := `{"Resources":{
	 "Fn":{"Type":"AWS::Lambda::Function","DependsOn":["X"],"DeletionPolicy":"Retain","Properties":{
	   "MemorySize":512,"Timeout":"30","Role":{"Fn::GetAtt":["R","Arn"]},"Architectures":["arm64"],
	   "Environment":{"Variables":{"A":"1","B":{"Ref":"T"},"C":7}},
	   "Tags":[{"Key":"k","Value":"v"}],
	   "Code":{"S3Bucket":{"Fn::Sub":"b-${AWS::Region}"},"S3Key":"k.zip"},"Old":"legacy"}},
	 "Alarm":{"Type":"AWS::CloudWatch::Alarm","Properties":{"TreatMissingData":"notBreaching","Threshold":0.2,"ActionsEnabled":"true"}},
	 "Meta":{"Type":"AWS::CDK::Metadata","Properties":{"Analytics":"v2:deflate64:..."}},
	 "Custom":{"Type":"Custom::Thing","Properties":{"Anything":1}}}}`
	if errs := s.Validate([]byte(tpl)); len(errs) != 0 {
		t.Errorf("a valid template: %v", errs)
	}
}

func TestInvalidTemplateFails(t *testing.T) {
	s := smallSpec(t)
	for _, c := range []struct{ name, tpl, want string }{
		{"wrong property name", `{"Resources":{"F":{"Type":"AWS::Lambda::Function","Properties":{"Role":"r","MemorySise":512}}}}`,
			"F: AWS::Lambda::Function: unknown property MemorySise"},
		{"string for an integer", `{"Resources":{"F":{"Type":"AWS::Lambda::Function","Properties":{"Role":"r","MemorySize":"lots"}}}}`,
			`F: AWS::Lambda::Function.MemorySize: a string "lots", want an integer`},
		{"fraction for an integer", `{"Resources":{"F":{"Type":"AWS::Lambda::Function","Properties":{"Role":"r","Timeout":1.5}}}}`,
			"want an integer"},
		{"object for a string", `{"Resources":{"F":{"Type":"AWS::Lambda::Function","Properties":{"Role":{"Arn":"x"}}}}}`,
			"F: AWS::Lambda::Function.Role: an object"},
		{"required missing", `{"Resources":{"F":{"Type":"AWS::Lambda::Function","Properties":{"MemorySize":128}}}}`,
			"required property Role missing"},
		{"nested unknown", `{"Resources":{"F":{"Type":"AWS::Lambda::Function","Properties":{"Role":"r","Environment":{"Vars":{}}}}}}`,
			"F: AWS::Lambda::Function.Environment: unknown property Vars"},
		{"map element", `{"Resources":{"F":{"Type":"AWS::Lambda::Function","Properties":{"Role":"r","Environment":{"Variables":{"A":["x"]}}}}}}`,
			"F: AWS::Lambda::Function.Environment.Variables.A: a list"},
		{"list element", `{"Resources":{"F":{"Type":"AWS::Lambda::Function","Properties":{"Role":"r","Architectures":[{"a":1}]}}}}`,
			"Architectures[0]: an object"},
		{"not a list", `{"Resources":{"F":{"Type":"AWS::Lambda::Function","Properties":{"Role":"r","Architectures":"arm64"}}}}`,
			"want a list"},
		{"union", `{"Resources":{"F":{"Type":"AWS::Lambda::Function","Properties":{"Role":"r","Code":{"S3Bucket":"b"}}}}}`,
			"required property S3Key missing"},
		{"tag", `{"Resources":{"F":{"Type":"AWS::Lambda::Function","Properties":{"Role":"r","Tags":[{"Key":"k","Val":"v"}]}}}}`,
			"unknown tag field Val"},
		{"allowed values", `{"Resources":{"A":{"Type":"AWS::CloudWatch::Alarm","Properties":{"TreatMissingData":"notbreaching"}}}}`,
			"want one of breaching, notBreaching"},
		{"boolean", `{"Resources":{"A":{"Type":"AWS::CloudWatch::Alarm","Properties":{"ActionsEnabled":"yes"}}}}`,
			"want a boolean"},
		{"unknown type", `{"Resources":{"X":{"Type":"AWS::Lambda::Funktion","Properties":{}}}}`,
			"X: unknown resource type AWS::Lambda::Funktion"},
		{"resource attribute", `{"Resources":{"A":{"Type":"AWS::CloudWatch::Alarm","Propreties":{}}}}`,
			`A: unknown resource attribute "Propreties"`},
		{"deletion policy", `{"Resources":{"A":{"Type":"AWS::CloudWatch::Alarm","DeletionPolicy":"Keep"}}}`,
			`DeletionPolicy "Keep" is not one of`},
	} {
		errs := s.Validate([]byte(c.tpl))
		found := false
		for _, err := range errs {
			if strings.Contains(err.Error(), c.want) {
				found = true
			}
		}
		if !found {
			t.Errorf("%s: errors %v, want one containing %q", c.name, errs, c.want)
		}
	}
}
