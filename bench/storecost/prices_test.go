package main

import (
	"encoding/json"
	"os"
	"reflect"
	"strings"
	"testing"

	"github.com/mirrorfleet/mirrorfleet/bench/internal/results"
)

// The committed results were billed with the sheet's prices: the sheet read back gives
// the same figures to the last bit, derived Spot prices included.
func TestPriceSheetMatchesTheResults(t *testing.T) {
	ps, err := loadPrices()
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile("../results/storecost.json")
	if err != nil {
		t.Skipf("no committed storecost results to compare with: %v", err)
	}
	var res results.StoreCost
	if err := json.Unmarshal(b, &res); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(ps, res.Prices) {
		t.Errorf("sheet:\n%+v\nresults:\n%+v", ps, res.Prices)
	}
	if got, want := priceOf(ps, "fargate_spot_vcpu_arm"), 0.03238*(0.01334053/0.04048); got != want {
		t.Errorf("derived Spot price %v, want %v", got, want)
	}
}

func TestPriceSheetRefusesBadEntries(t *testing.T) {
	for name, sheet := range map[string]string{
		"no date":      `{"prices":[{"key":"a","usd":1}]}`,
		"repeated key": `{"taken":"2026-01-01","prices":[{"key":"a","usd":1},{"key":"a","usd":2}]}`,
		"negative":     `{"taken":"2026-01-01","prices":[{"key":"a","usd":-1}]}`,
		"zero ratio":   `{"taken":"2026-01-01","prices":[{"key":"a","usd":1,"scale":{"by":1,"over":0}}]}`,
		"not JSON":     `prices`,
	} {
		if _, err := parsePrices([]byte(sheet)); err == nil || !strings.Contains(err.Error(), "price sheet") {
			t.Errorf("%s: err %v", name, err)
		}
	}
}
