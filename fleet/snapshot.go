package fleet

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
)

// ParseState decodes a JSON fleet snapshot. Unknown fields and trailing
// data are errors; every error names the line and column (and, for a value
// of the wrong type, the field). It does not check the snapshot against a
// config: see State.Validate.
//
// A pool's "unobserved" may also be the words older snapshots held there
// (see Unobserved.String), which are read back into their code, and its
// "never_read" the flag they held beside them.
func ParseState(src []byte) (State, error) {
	var st State
	dec, err := decodeStrict(src, &st)
	if te := (*json.UnmarshalTypeError)(nil); errors.As(err, &te) && te.Field == "pools.unobserved" && te.Value == "string" ||
		err != nil && strings.HasSuffix(err.Error(), `unknown field "never_read"`) {
		return parseOldState(src)
	}
	if err != nil {
		return State{}, placeError(src, dec, err)
	}
	return st, nil
}

// oldState is a snapshot whose pools' "unobserved" may be words (the old
// form) or an object.
type oldState struct {
	State
	Pools []oldPoolStatus `json:"pools,omitempty"`
}

// oldPoolStatus is a pool status whose "unobserved" is read later, with
// the old "never_read" flag.
type oldPoolStatus struct {
	PoolStatus
	Unobserved json.RawMessage `json:"unobserved,omitempty"`
	NeverRead  bool            `json:"never_read,omitempty"`
}

// parseOldState reads a snapshot whose pools' "unobserved" may be words.
// Errors are placed as ParseState places them; an "unobserved" object's
// at the object's start, naming the pool.
func parseOldState(src []byte) (State, error) {
	var old oldState
	if err := DecodeJSON(src, &old); err != nil {
		return State{}, err
	}
	st := old.State
	st.Pools = make([]PoolStatus, len(old.Pools))
	from := 0 // where the next pool's "unobserved" is looked for in src
	for i, p := range old.Pools {
		st.Pools[i] = p.PoolStatus
		if len(p.Unobserved) == 0 || string(p.Unobserved) == "null" {
			continue
		}
		off := from + max(bytes.Index(src[from:], p.Unobserved), 0)
		from = off + len(p.Unobserved)
		var words string
		if json.Unmarshal(p.Unobserved, &words) == nil {
			st.Pools[i].Unobserved = parseUnobserved(words)
			if p.NeverRead && st.Pools[i].Unobserved.Code == UnobservedReadFailed {
				st.Pools[i].Unobserved.Code = UnobservedNeverRead
			}
			continue
		}
		dec := json.NewDecoder(bytes.NewReader(p.Unobserved))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&st.Pools[i].Unobserved); err != nil {
			return State{}, at(src, int64(off), fmt.Errorf("pools[%d].unobserved: %w", i, err))
		}
	}
	return st, nil
}

// DecodeJSON decodes one JSON value from src into v strictly: unknown
// fields and trailing data are errors, and every error names the line and
// column (and, for a value of the wrong type, the field).
func DecodeJSON(src []byte, v any) error {
	dec, err := decodeStrict(src, v)
	return placeError(src, dec, err)
}

// decodeStrict decodes one JSON value from src into v, unknown fields and
// trailing data being errors; the errors are json's, not yet placed.
func decodeStrict(src []byte, v any) (*json.Decoder, error) {
	dec := json.NewDecoder(bytes.NewReader(src))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return dec, err
	}
	if dec.More() {
		return dec, errTrailing
	}
	return dec, nil
}

// errTrailing is data after the JSON value.
var errTrailing = errors.New("unexpected data after the JSON object")

// placeError is decodeStrict's error placed in src (nil for nil).
func placeError(src []byte, dec *json.Decoder, err error) error {
	switch {
	case err == nil:
		return nil
	case err == errTrailing:
		return at(src, dec.InputOffset(), err)
	}
	return decodeError(src, dec, err)
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
