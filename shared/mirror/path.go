package mirror

import (
	"strings"

	"github.com/mirrorfleet/mirrorfleet/shared/fetch"
)

// sanitizeName makes an ID usable as one file name component.
func sanitizeName(id string) string {
	if id == "" {
		return "repo"
	}
	var b strings.Builder
	for i := 0; i < len(id) && b.Len() < 100; i++ {
		c := id[i]
		if c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-' || (c == '.' && i > 0) {
			b.WriteByte(c)
		} else {
			b.WriteByte('_')
		}
	}
	return b.String()
}

func policyErr(format string, args ...any) error {
	return fetch.Errorf(fetch.KindPolicy, format, args...)
}
