package main

import (
	"fmt"

	"github.com/mirrorfleet/mirrorfleet/shared/store/bolt"
)

// checkStoreFile opens a store copy as the fleet will on restore (which also checks its
// schema version) and counts its repos.
func checkStoreFile(path string) error {
	st, err := bolt.Open(path)
	if err != nil {
		return fmt.Errorf("the copy does not open as a store: %w", err)
	}
	return st.Close()
}
