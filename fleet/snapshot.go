package fleet

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
)

// ParseState decodes a JSON fleet snapshot. Unknown fields and trailing
// data are errors; every error names the line and column (and, for a value
// of the wrong type, the field). It does not check the snapshot against a
// config: see State.Validate.
func ParseState(src []byte) (State, error) {
	var st State
	if err := DecodeJSON(src, &st); err != nil {
		return State{}, err
	}
	return st, nil
}

// DecodeJSON decodes one JSON value from src into v strictly: unknown
// fields and trailing data are errors, and every error names the line and
// column (and, for a value of the wrong type, the field).
func DecodeJSON(src []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(src))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return decodeError(src, dec, err)
	}
	if dec.More() {
		return at(src, dec.InputOffset(), errors.New("unexpected data after the JSON object"))
	}
	return nil
}

// decodeError places a JSON decoding error at the byte that caused it.
func decodeError(src []byte, dec *json.Decoder, err error) error {
	var se *json.SyntaxError
	var te *json.UnmarshalTypeError
	switch {
	case errors.Is(err, io.EOF):
		return errors.New("empty input, want a JSON object")
	case errors.As(err, &se):
		// Offset counts the bytes read, the bad one included.
		return at(src, se.Offset-1, err)
	case errors.As(err, &te):
		return at(src, te.Offset-1, fmt.Errorf("field %s: got JSON %s, want %s", te.Field, te.Value, te.Type))
	}
	return at(src, dec.InputOffset(), err)
}

// at prefixes err with the line and column of the byte at index i of src.
func at(src []byte, i int64, err error) error {
	i = min(max(i, 0), int64(len(src)))
	line := 1 + bytes.Count(src[:i], []byte("\n"))
	col := i - int64(bytes.LastIndexByte(src[:i], '\n'))
	return fmt.Errorf("line %d, column %d: %w", line, col, err)
}
