package plausible

import "strings"

// interner maps strings to dense ids; id 0 is "". Strings are cloned on
// first sight so the event source may reuse its buffers.
type interner struct {
	ids  map[string]int32
	strs []string
}

func newInterner() *interner {
	return &interner{ids: map[string]int32{"": 0}, strs: []string{""}}
}

func (in *interner) id(s string) int32 {
	if s == "" {
		return 0
	}
	if id, ok := in.ids[s]; ok {
		return id
	}
	s = strings.Clone(s)
	id := int32(len(in.strs))
	in.ids[s] = id
	in.strs = append(in.strs, s)
	return id
}

// lookup returns s's id without adding it, or -1.
func (in *interner) lookup(s string) int32 {
	if id, ok := in.ids[s]; ok {
		return id
	}
	return -1
}

func (in *interner) str(id int32) string { return in.strs[id] }
