package tokenizers

import (
	"container/heap"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"unicode/utf8"
)

// bpeJSON is the "model" object of a BPE tokenizer.json.
type bpeJSON struct {
	Type                    string           `json:"type"`
	Dropout                 *float64         `json:"dropout"`
	UnkToken                *string          `json:"unk_token"`
	ContinuingSubwordPrefix *string          `json:"continuing_subword_prefix"`
	EndOfWordSuffix         *string          `json:"end_of_word_suffix"`
	FuseUnk                 bool             `json:"fuse_unk"`
	ByteFallback            bool             `json:"byte_fallback"`
	IgnoreMerges            bool             `json:"ignore_merges"`
	Vocab                   map[string]int32 `json:"vocab"`
	Merges                  json.RawMessage  `json:"merges"`
}

// merge is the rank of a pair and the id of the token it makes.
type merge struct {
	rank  int32
	newID int32
}

// bpe is the BPE model (tokenizers/src/models/bpe/model.rs) without dropout.
type bpe struct {
	vocab        map[string]int32
	merges       map[uint64]merge
	unkID        int32 // -1: no unk_token
	prefix       string
	suffix       string
	fuseUnk      bool
	byteFallback bool
	ignoreMerges bool
	byteIDs      [256]int32 // id of <0xXX>, or -1

	cache  sync.Map // word -> []int32
	cached atomic.Int64
}

const bpeCacheSize = 1 << 16

func pairKey(a, b int32) uint64 { return uint64(uint32(a))<<32 | uint64(uint32(b)) }

// parseBPE builds the model; where is "model".
func parseBPE(raw json.RawMessage, where string) (*bpe, error) {
	typ, err := componentType(raw, where)
	if err != nil {
		return nil, err
	}
	if typ != "BPE" {
		return nil, unsupported(where, "model", typ, "BPE (WordPiece tokenizers load through loaders.LoadTokenizer)")
	}
	var j bpeJSON
	if err := strict(raw, &j, where); err != nil {
		return nil, err
	}
	if j.Dropout != nil && *j.Dropout != 0 {
		return nil, fmt.Errorf("%s: dropout %v is not supported (BPE dropout makes encoding random; set it to null)", where, *j.Dropout)
	}
	m := &bpe{vocab: j.Vocab, unkID: -1, fuseUnk: j.FuseUnk, byteFallback: j.ByteFallback, ignoreMerges: j.IgnoreMerges}
	if m.vocab == nil {
		return nil, fmt.Errorf("%s: no vocab", where)
	}
	if j.ContinuingSubwordPrefix != nil {
		m.prefix = *j.ContinuingSubwordPrefix
	}
	if j.EndOfWordSuffix != nil {
		m.suffix = *j.EndOfWordSuffix
	}
	if j.UnkToken != nil {
		id, ok := m.vocab[*j.UnkToken]
		if !ok {
			return nil, fmt.Errorf("%s: unk_token %q is not in the vocab", where, *j.UnkToken)
		}
		m.unkID = id
	}
	for b := range m.byteIDs {
		m.byteIDs[b] = -1
		if id, ok := m.vocab[fmt.Sprintf("<0x%02X>", b)]; ok {
			m.byteIDs[b] = id
		}
	}
	pairs, err := parseMerges(j.Merges, where+".merges")
	if err != nil {
		return nil, err
	}
	m.merges = make(map[uint64]merge, len(pairs))
	for rank, p := range pairs {
		a, ok1 := m.vocab[p[0]]
		b, ok2 := m.vocab[p[1]]
		if !ok1 || !ok2 {
			return nil, fmt.Errorf("%s.merges[%d]: %q %q: a token of the pair is not in the vocab", where, rank, p[0], p[1])
		}
		joined := p[0] + strings.TrimPrefix(p[1], m.prefix)
		if m.prefix == "" {
			joined = p[0] + p[1]
		}
		id, ok := m.vocab[joined]
		if !ok {
			return nil, fmt.Errorf("%s.merges[%d]: the merged token %q is not in the vocab", where, rank, joined)
		}
		k := pairKey(a, b)
		if _, dup := m.merges[k]; !dup { // the library keeps the first rank of a repeated pair
			m.merges[k] = merge{int32(rank), id}
		}
	}
	return m, nil
}

// parseMerges accepts both layouts the library writes: ["a b", ...] (before 0.20) and [["a","b"], ...].
func parseMerges(raw json.RawMessage, where string) ([][2]string, error) {
	if isNull(raw) {
		return nil, nil
	}
	var strs []string
	if err := json.Unmarshal(raw, &strs); err == nil {
		out := make([][2]string, len(strs))
		for i, s := range strs {
			a, b, ok := strings.Cut(s, " ")
			if !ok || strings.Contains(b, " ") {
				return nil, fmt.Errorf("%s[%d]: %q is not two tokens separated by one space", where, i, s)
			}
			out[i] = [2]string{a, b}
		}
		return out, nil
	}
	var pairs [][]string
	if err := json.Unmarshal(raw, &pairs); err != nil {
		return nil, fmt.Errorf("%s: want a list of \"a b\" strings or of [a, b] pairs", where)
	}
	out := make([][2]string, len(pairs))
	for i, p := range pairs {
		if len(p) != 2 {
			return nil, fmt.Errorf("%s[%d]: want 2 tokens, got %d", where, i, len(p))
		}
		out[i] = [2]string{p[0], p[1]}
	}
	return out, nil
}

// tokenize returns the ids of one pre-token.
func (m *bpe) tokenize(w string) []int32 {
	if w == "" {
		return nil
	}
	if m.ignoreMerges {
		if id, ok := m.vocab[w]; ok {
			return []int32{id}
		}
	}
	if v, ok := m.cache.Load(w); ok {
		return v.([]int32)
	}
	ids := m.mergeWord(w)
	if m.cached.Load() < bpeCacheSize {
		m.cached.Add(1)
		m.cache.Store(w, ids)
	}
	return ids
}

// symbol is one element of the word being merged (models/bpe/word.rs Symbol).
type symbol struct {
	id         int32
	prev, next int
	gone       bool
}

// mergeWord is model.rs merge_word followed by word.rs merge_all.
func (m *bpe) mergeWord(w string) []int32 {
	var syms []symbol
	add := func(id int32) {
		syms = append(syms, symbol{id: id, prev: len(syms) - 1, next: len(syms) + 1})
	}
	unk := false // an unk is pending (fuse_unk merges a run of them)
	for i, r := range w {
		n := utf8.RuneLen(r)
		s := w[i : i+n]
		if i > 0 && m.prefix != "" {
			s = m.prefix + s
		}
		if i+n == len(w) && m.suffix != "" {
			s += m.suffix
		}
		if id, ok := m.vocab[s]; ok {
			if unk {
				add(m.unkID)
				unk = false
			}
			add(id)
			continue
		}
		if m.byteFallback {
			all := true
			for k := 0; k < len(s); k++ {
				all = all && m.byteIDs[s[k]] >= 0
			}
			if all { // the library leaves a pending unk pending here
				for k := 0; k < len(s); k++ {
					add(m.byteIDs[s[k]])
				}
				continue
			}
		}
		if m.unkID >= 0 {
			if unk && !m.fuseUnk {
				add(m.unkID)
			}
			unk = true
		}
	}
	if unk {
		add(m.unkID)
	}
	if len(syms) == 0 {
		return nil
	}
	syms[len(syms)-1].next = -1
	q := &mergeQueue{}
	for i := 0; i+1 < len(syms); i++ {
		if mg, ok := m.merges[pairKey(syms[i].id, syms[i+1].id)]; ok {
			*q = append(*q, queued{i, mg})
		}
	}
	heap.Init(q)
	for q.Len() > 0 {
		top := heap.Pop(q).(queued)
		cur := &syms[top.pos]
		if cur.gone || cur.next == -1 {
			continue
		}
		right := syms[cur.next]
		if mg, ok := m.merges[pairKey(cur.id, right.id)]; !ok || mg.newID != top.m.newID {
			continue // a stale entry
		}
		cur.id = top.m.newID
		syms[cur.next].gone = true
		cur.next = right.next
		if right.next >= 0 {
			syms[right.next].prev = top.pos
		}
		if cur.prev >= 0 {
			if mg, ok := m.merges[pairKey(syms[cur.prev].id, cur.id)]; ok {
				heap.Push(q, queued{cur.prev, mg})
			}
		}
		if cur.next >= 0 {
			if mg, ok := m.merges[pairKey(cur.id, syms[cur.next].id)]; ok {
				heap.Push(q, queued{top.pos, mg})
			}
		}
	}
	out := make([]int32, 0, len(syms))
	for _, s := range syms {
		if !s.gone {
			out = append(out, s.id)
		}
	}
	return out
}

// queued is a merge waiting in the queue at symbol position pos.
type queued struct {
	pos int
	m   merge
}

// mergeQueue pops the lowest rank first, the leftmost position among equal ranks (word.rs Merge's Ord).
type mergeQueue []queued

func (q mergeQueue) Len() int { return len(q) }
func (q mergeQueue) Less(i, j int) bool {
	if q[i].m.rank != q[j].m.rank {
		return q[i].m.rank < q[j].m.rank
	}
	return q[i].pos < q[j].pos
}
func (q mergeQueue) Swap(i, j int) { q[i], q[j] = q[j], q[i] }
func (q *mergeQueue) Push(x any)   { *q = append(*q, x.(queued)) }
func (q *mergeQueue) Pop() any {
	old := *q
	x := old[len(old)-1]
	*q = old[:len(old)-1]
	return x
}
