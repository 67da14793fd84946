// Package logtest holds what tests need to capture a component's logs.
package logtest

import (
	"bytes"
	"sync"
)

// Buffer is a log sink safe for concurrent writes; tests print it when they fail.
type Buffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *Buffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *Buffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
