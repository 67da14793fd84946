package main

import (
	_ "embed"
	"encoding/json"
	"fmt"
	"math/big"

	"github.com/mirrorfleet/mirrorfleet/bench/internal/results"
)

// priceSheet is the list prices the bills are computed from, with where each was read
// and the day: data, so that a price check edits a table, not the program.
//
//go:embed prices.json
var priceSheet []byte

// sheet is prices.json's layout.
type sheet struct {
	Region string       `json:"region"`
	Taken  string       `json:"taken"` // the day the prices were looked up (YYYY-MM-DD)
	Prices []sheetPrice `json:"prices"`
}

type sheetPrice struct {
	Key       string      `json:"key"`
	Service   string      `json:"service"`
	Item      string      `json:"item"`
	USD       json.Number `json:"usd"`
	Unit      string      `json:"unit"`
	Source    string      `json:"source"`
	Taken     string      `json:"taken"` // the day it was looked up, when not the sheet's
	Confirmed bool        `json:"confirmed"`
	Note      string      `json:"note"`
	// Scale derives a price from another's figure: USD × By / Over.
	Scale *struct {
		By, Over json.Number
	} `json:"scale"`
}

// loadPrices reads the embedded price sheet.
func loadPrices() ([]results.StoreCostPrice, error) {
	return parsePrices(priceSheet)
}

func parsePrices(data []byte) ([]results.StoreCostPrice, error) {
	var sh sheet
	if err := json.Unmarshal(data, &sh); err != nil {
		return nil, fmt.Errorf("price sheet: %w", err)
	}
	if sh.Taken == "" {
		return nil, fmt.Errorf("price sheet: no date taken")
	}
	seen := map[string]bool{}
	out := make([]results.StoreCostPrice, 0, len(sh.Prices))
	for _, p := range sh.Prices {
		if p.Key == "" || seen[p.Key] {
			return nil, fmt.Errorf("price sheet: key %q empty or repeated", p.Key)
		}
		seen[p.Key] = true
		usd, err := p.usd()
		if err != nil {
			return nil, fmt.Errorf("price sheet: %s: %w", p.Key, err)
		}
		taken := sh.Taken
		if p.Taken != "" {
			taken = p.Taken
		}
		out = append(out, results.StoreCostPrice{Key: p.Key, Service: p.Service, Item: p.Item, USD: usd, Unit: p.Unit,
			Source: p.Source, Taken: taken, Confirmed: p.Confirmed, Note: p.Note})
	}
	return out, nil
}

// usd is the price in dollars. A derived price is computed exactly and rounded once.
func (p sheetPrice) usd() (float64, error) {
	v, ok := new(big.Rat).SetString(string(p.USD))
	if !ok || v.Sign() < 0 {
		return 0, fmt.Errorf("usd %q is not a price", p.USD)
	}
	if p.Scale != nil {
		by, ok1 := new(big.Rat).SetString(string(p.Scale.By))
		over, ok2 := new(big.Rat).SetString(string(p.Scale.Over))
		if !ok1 || !ok2 || by.Sign() <= 0 || over.Sign() <= 0 {
			return 0, fmt.Errorf("scale %s/%s is not a ratio", p.Scale.By, p.Scale.Over)
		}
		v.Mul(v, by).Quo(v, over)
	}
	f, _ := v.Float64()
	return f, nil
}

// priceOf returns a price by key; the table is fixed, so a missing key is a bug.
func priceOf(ps []results.StoreCostPrice, key string) float64 {
	for _, p := range ps {
		if p.Key == key {
			return p.USD
		}
	}
	panic("storecost: no price " + key)
}
