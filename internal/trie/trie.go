package trie

// Trie maps keys (sequences of S: bytes, runes) to values.
type Trie[S comparable, V any] struct {
	next  map[edge[S]]int32 // (node, symbol) → child node; node 0 is the root
	value map[int32]V       // the value of a node that ends a key
	nodes int32
	// MaxLen is the length of the longest key inserted.
	MaxLen int
}

type edge[S comparable] struct {
	node int32
	sym  S
}

// New returns an empty Trie.
func New[S comparable, V any]() *Trie[S, V] {
	return &Trie[S, V]{next: map[edge[S]]int32{}, value: map[int32]V{}, nodes: 1}
}

// Insert adds key with value v; a key already present keeps its first value. An empty key is ignored.
func (t *Trie[S, V]) Insert(key []S, v V) {
	if len(key) == 0 {
		return
	}
	n := int32(0)
	for _, s := range key {
		c, ok := t.next[edge[S]{n, s}]
		if !ok {
			c = t.nodes
			t.nodes++
			t.next[edge[S]{n, s}] = c
		}
		n = c
	}
	if _, ok := t.value[n]; !ok {
		t.value[n] = v
	}
	t.MaxLen = max(t.MaxLen, len(key))
}

// Longest returns the value of the longest key that is a prefix of the text whose symbols at(0), at(1), ...
// are (at reports false past its end), and the key's length; ok is false when no key is.
func (t *Trie[S, V]) Longest(at func(int) (S, bool)) (v V, n int, ok bool) {
	node := int32(0)
	for i := 0; ; i++ {
		s, more := at(i)
		if !more {
			return
		}
		c, found := t.next[edge[S]{node, s}]
		if !found {
			return
		}
		node = c
		if val, end := t.value[node]; end {
			v, n, ok = val, i+1, true
		}
	}
}

// Len is the number of nodes, the root included.
func (t *Trie[S, V]) Len() int { return int(t.nodes) }
