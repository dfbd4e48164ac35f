package usage

// Labels bounds a label space (teams, or tiers): the first Max distinct
// labels it sees are kept, every later one is folded into Other, and an
// empty one is Unattributed. So a bad client naming a new team in every
// push cannot grow memory or metrics without bound. It is not safe for
// concurrent use.
type Labels struct {
	max  int
	seen map[string]struct{}
}

// NewLabels keeps at most limit distinct labels (at least 1).
func NewLabels(limit int) *Labels {
	return &Labels{max: max(limit, 1), seen: map[string]struct{}{}}
}

// Fold is s as reports and metrics name it: s itself if it is one of the
// labels kept (keeping it if there is room), Other past the cap,
// Unattributed when empty. Unattributed, Other and IdleLabel are kept
// without taking room.
func (l *Labels) Fold(s string) string {
	switch s {
	case "":
		return Unattributed
	case Unattributed, Other, IdleLabel:
		return s
	}
	if _, ok := l.seen[s]; ok {
		return s
	}
	if len(l.seen) >= l.max {
		return Other
	}
	l.seen[s] = struct{}{}
	return s
}

// Len is the number of labels kept.
func (l *Labels) Len() int { return len(l.seen) }
