package state

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
)

// IntentKind is the cloud change an intent announces.
type IntentKind string

// The kinds of intent the controller journals.
const (
	// IntentLaunch grows a pool's group to Target (Count more instances).
	IntentLaunch IntentKind = "launch"
	// IntentTerminate removes Node from its pool.
	IntentTerminate IntentKind = "terminate"
	// IntentDrain cordons Node and asks its jobs to checkpoint.
	IntentDrain IntentKind = "drain"
	// IntentCancelDrain returns Node to service.
	IntentCancelDrain IntentKind = "cancel_drain"
	// IntentReap removes Node, an orphan of Pool (a pool the config no
	// longer has).
	IntentReap IntentKind = "reap"
)

func (k IntentKind) valid() bool {
	switch k {
	case IntentLaunch, IntentTerminate, IntentDrain, IntentCancelDrain, IntentReap:
		return true
	}
	return false
}

// Intent is a cloud change the controller is about to make, journaled
// before it is made and removed once the cloud shows it done (or undone).
type Intent struct {
	// Key is the change's idempotency key (a client token or tag the cloud
	// sees), unique among intents.
	Key  string     `json:"key"`
	Kind IntentKind `json:"kind"`
	Pool string     `json:"pool"`
	// Node is the node acted on; empty for launches.
	Node string `json:"node,omitempty"`
	// Count and Target are a launch's instances and the group's size once
	// they are added.
	Count  int `json:"count,omitempty"`
	Target int `json:"target,omitempty"`
	// Names are the names a launch's instances are to take
	// (providers.LaunchRequest.Names), comma-separated (a name has no
	// comma), sent again with it after a restart; empty for a pool whose
	// instances are not named.
	Names string `json:"names,omitempty"`
	// Created is when the controller decided.
	Created time.Time `json:"created"`
}

// NameList is Names as a list, nil for none.
func (in Intent) NameList() []string {
	if in.Names == "" {
		return nil
	}
	return strings.Split(in.Names, ",")
}

// Validate checks the fields an intent must have.
func (in Intent) Validate() error {
	switch {
	case in.Key == "":
		return errors.New("intent: key is empty")
	case !in.Kind.valid():
		return fmt.Errorf("intent %s: kind %q, expected launch, terminate, drain or cancel_drain", in.Key, in.Kind)
	case in.Pool == "":
		return fmt.Errorf("intent %s: pool is empty", in.Key)
	case in.Kind == IntentLaunch && (in.Count < 1 || in.Target < in.Count):
		return fmt.Errorf("intent %s: launch of %d to target %d, expected count >= 1 and target >= count", in.Key, in.Count, in.Target)
	case in.Names != "" && strings.Count(in.Names, ",")+1 > in.Count:
		return fmt.Errorf("intent %s: names %q for a launch of %d, expected at most one each", in.Key, in.Names, in.Count)
	case in.Kind != IntentLaunch && in.Node == "":
		return fmt.Errorf("intent %s: %s with no node", in.Key, in.Kind)
	case in.Created.IsZero():
		return fmt.Errorf("intent %s: created is not set", in.Key)
	}
	return nil
}

// PutIntent journals an intent. A second intent with the same key is
// refused: the key is what makes the change happen at most once.
func (s *Store) PutIntent(in Intent) error {
	if err := in.Validate(); err != nil {
		return fmt.Errorf("state: %w", err)
	}
	return s.kv.update(func(tx kvTx) error {
		b := tx.Bucket(bucketIntents)
		if b.Get([]byte(in.Key)) != nil {
			return fmt.Errorf("state: intent %s is already journaled", in.Key)
		}
		return putJSON(b, in.Key, in)
	})
}

// DoneIntent removes an intent once the cloud shows it done or undone.
// Removing one that is not there is not an error (it may have been removed
// before a restart).
func (s *Store) DoneIntent(key string) error {
	return s.kv.update(func(tx kvTx) error {
		return tx.Bucket(bucketIntents).Delete([]byte(key))
	})
}

// Intents returns the journaled intents, oldest first (ties by key).
func (s *Store) Intents() ([]Intent, error) {
	out, err := all[Intent](s, bucketIntents)
	slices.SortFunc(out, func(a, b Intent) int {
		if c := a.Created.Compare(b.Created); c != 0 {
			return c
		}
		return strings.Compare(a.Key, b.Key)
	})
	return out, err
}
