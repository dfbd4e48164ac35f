package simulate

// event kinds, in the order they happen within a second: a checkpoint that
// is durable when the cloud reclaims its node is saved.
const (
	evFinish     = iota
	evCheckpoint // a checkpoint a drain asked for is durable
	evReady
	evNotice    // a spot interruption notice
	evInterrupt // the cloud reclaims a spot node
)

type event struct {
	t    int64
	kind uint8
	id   int32
	gen  uint32
}

type eventHeap []event

func (h eventHeap) Len() int { return len(h) }
func (h eventHeap) Less(i, j int) bool {
	a, b := &h[i], &h[j]
	switch {
	case a.t != b.t:
		return a.t < b.t
	case a.kind != b.kind:
		return a.kind < b.kind
	case a.id != b.id:
		// Ties in a fixed order (nodes that come up together, in launch
		// order), whatever the order events were pushed in.
		return a.id < b.id
	}
	return a.gen < b.gen
}
func (h eventHeap) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *eventHeap) Push(x any)   { *h = append(*h, x.(event)) }
func (h *eventHeap) Pop() any {
	old := *h
	e := old[len(old)-1]
	*h = old[:len(old)-1]
	return e
}
