package runtimeapi

import (
	"os"
	"testing"
)

func tempDir() (string, error) { return os.MkdirTemp("", "runtimeapi-") }

func TestMain(m *testing.M) {
	code := m.Run()
	if echoDir != "" {
		os.RemoveAll(echoDir)
	}
	os.Exit(code)
}
