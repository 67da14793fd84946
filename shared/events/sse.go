package events

import (
	"bufio"
	"io"
	"strings"
)

// Message is one Server-Sent Events message as a client reads it.
type Message struct {
	Event string // "message" when the stream named none
	ID    string
	Data  string // data lines joined by "\n"
}

// ReadStream reads Server-Sent Events from r and calls f with each message that has
// data, until r ends or f returns an error (which ReadStream returns). Comments (lines
// starting with ':') and retry fields are skipped. Lines are at most maxLine bytes.
func ReadStream(r io.Reader, maxLine int, f func(Message) error) error {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), maxLine)
	var m Message
	var data []string
	for sc.Scan() {
		line := sc.Text()
		if line == "" {
			if len(data) > 0 {
				m.Data = strings.Join(data, "\n")
				if m.Event == "" {
					m.Event = "message"
				}
				if err := f(m); err != nil {
					return err
				}
			}
			m, data = Message{}, nil
			continue
		}
		if strings.HasPrefix(line, ":") {
			continue
		}
		field, value, _ := strings.Cut(line, ":")
		value = strings.TrimPrefix(value, " ")
		switch field {
		case "event":
			m.Event = value
		case "id":
			m.ID = value
		case "data":
			data = append(data, value)
		}
	}
	return sc.Err()
}
