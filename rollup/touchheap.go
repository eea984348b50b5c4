package rollup

// touchHeap orders visitor states by the time they were last touched,
// oldest first. Events arrive out of order (several edges, late
// segments), so a plain queue in touch order is not sorted by lastMS: a
// min-heap lets closeIdle stop at the first state that is still recent.
// An entry is stale when its state was touched again later (lastMS moved
// on) or left memory; stale entries are skipped when popped, and the heap
// is rebuilt from the live states when they outnumber them.
type touchHeap []touch

func (h *touchHeap) push(e touch) {
	*h = append(*h, e)
	s := *h
	i := len(s) - 1
	for i > 0 {
		p := (i - 1) / 2
		if s[p].ms <= s[i].ms {
			break
		}
		s[p], s[i] = s[i], s[p]
		i = p
	}
}

// peek returns the oldest entry; the heap must not be empty.
func (h touchHeap) peek() touch { return h[0] }

func (h *touchHeap) pop() touch {
	s := *h
	top := s[0]
	n := len(s) - 1
	s[0] = s[n]
	*h = s[:n]
	h.down(0)
	return top
}

// rebuild replaces the heap with one entry per live state.
func (h *touchHeap) rebuild(active map[visitorKey]*visitorState) {
	s := (*h)[:0]
	for k, st := range active {
		s = append(s, touch{k, st.lastMS})
	}
	*h = s
	for i := len(s)/2 - 1; i >= 0; i-- {
		h.down(i)
	}
}

func (h touchHeap) down(i int) {
	n := len(h)
	for {
		l, m := 2*i+1, i
		if l < n && h[l].ms < h[m].ms {
			m = l
		}
		if r := l + 1; r < n && h[r].ms < h[m].ms {
			m = r
		}
		if m == i {
			return
		}
		h[m], h[i] = h[i], h[m]
		i = m
	}
}
