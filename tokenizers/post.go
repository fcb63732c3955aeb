package tokenizers

import (
	"encoding/json"
	"fmt"
)

// postProcessor adds special tokens around encoded sequences and sets their type ids
// (tokenizers/src/processors).
type postProcessor interface {
	// process joins a (and b when pair) into one sequence of ids and type ids.
	process(a, b []int32, pair, addSpecial bool) (ids, typeIDs []int32)
}

// defaultProcess concatenates, the second sequence with type id 1 (PostProcessor::default_process).
func defaultProcess(a, b []int32, pair bool) ([]int32, []int32) {
	ids := append(append([]int32{}, a...), b...)
	types := make([]int32, len(ids))
	if pair {
		for i := len(a); i < len(ids); i++ {
			types[i] = 1
		}
	}
	return ids, types
}

// postByteLevel changes offsets only; ids are the default's.
type postByteLevel struct{}

func (postByteLevel) process(a, b []int32, pair, _ bool) ([]int32, []int32) {
	return defaultProcess(a, b, pair)
}

// templatePiece is one element of a TemplateProcessing template.
type templatePiece struct {
	sequence string   // "A" or "B"; "" for a special token
	special  []int32  // the special token's ids
	tokens   []string // and their strings, checked against the vocabulary once it is built
	where    string
	typeID   int32
}

// postTemplate is TemplateProcessing (processors/template.rs).
type postTemplate struct{ single, pair []templatePiece }

func (p postTemplate) process(a, b []int32, pair, addSpecial bool) ([]int32, []int32) {
	tmpl := p.single
	if pair {
		tmpl = p.pair
	}
	var ids, types []int32
	for _, t := range tmpl {
		var add []int32
		switch t.sequence {
		case "A":
			add = a
		case "B":
			add = b
		default:
			if !addSpecial {
				continue
			}
			add = t.special
		}
		ids = append(ids, add...)
		for range add {
			types = append(types, t.typeID)
		}
	}
	return ids, types
}

// postSequence runs processors in order; the first sees the sequences, the rest the joined result.
type postSequence []postProcessor

func (q postSequence) process(a, b []int32, pair, addSpecial bool) ([]int32, []int32) {
	// Only TemplateProcessing changes ids; ByteLevel entries are offset fix-ups. Run the template ones.
	for _, p := range q {
		if t, ok := p.(postTemplate); ok {
			return t.process(a, b, pair, addSpecial)
		}
	}
	return defaultProcess(a, b, pair)
}

// parsePostProcessor builds the post-processor of raw (nil for JSON null).
func parsePostProcessor(raw json.RawMessage, where string) (postProcessor, error) {
	if isNull(raw) {
		return nil, nil
	}
	typ, err := componentType(raw, where)
	if err != nil {
		return nil, err
	}
	switch typ {
	case "ByteLevel":
		var j byteLevelJSON
		if err := strict(raw, &j, where); err != nil {
			return nil, err
		}
		return postByteLevel{}, nil
	case "Sequence":
		var j struct {
			Type       string            `json:"type"`
			Processors []json.RawMessage `json:"processors"`
		}
		if err := strict(raw, &j, where); err != nil {
			return nil, err
		}
		var q postSequence
		templates := 0
		for i, r := range j.Processors {
			p, err := parsePostProcessor(r, fmt.Sprintf("%s.processors[%d]", where, i))
			if err != nil {
				return nil, err
			}
			if _, ok := p.(postTemplate); ok {
				templates++
			}
			if _, ok := p.(postSequence); ok {
				return nil, fmt.Errorf("%s.processors[%d]: a nested Sequence is not supported", where, i)
			}
			q = append(q, p)
		}
		if templates > 1 {
			return nil, fmt.Errorf("%s: more than one TemplateProcessing is not supported", where)
		}
		return q, nil
	case "TemplateProcessing":
		var j struct {
			Type          string            `json:"type"`
			Single        []json.RawMessage `json:"single"`
			Pair          []json.RawMessage `json:"pair"`
			SpecialTokens map[string]struct {
				ID     string   `json:"id"`
				IDs    []int32  `json:"ids"`
				Tokens []string `json:"tokens"`
			} `json:"special_tokens"`
		}
		if err := strict(raw, &j, where); err != nil {
			return nil, err
		}
		parse := func(list []json.RawMessage, name string) ([]templatePiece, error) {
			var out []templatePiece
			for i, r := range list {
				w := fmt.Sprintf("%s.%s[%d]", where, name, i)
				var e struct {
					SpecialToken *struct {
						ID     string `json:"id"`
						TypeID int32  `json:"type_id"`
					} `json:"SpecialToken"`
					Sequence *struct {
						ID     string `json:"id"`
						TypeID int32  `json:"type_id"`
					} `json:"Sequence"`
				}
				if err := strict(r, &e, w); err != nil {
					return nil, err
				}
				switch {
				case e.Sequence != nil && e.SpecialToken == nil:
					if e.Sequence.ID != "A" && e.Sequence.ID != "B" {
						return nil, fmt.Errorf("%s: sequence id %q is not A or B", w, e.Sequence.ID)
					}
					out = append(out, templatePiece{sequence: e.Sequence.ID, typeID: e.Sequence.TypeID})
				case e.SpecialToken != nil && e.Sequence == nil:
					st, ok := j.SpecialTokens[e.SpecialToken.ID]
					if !ok {
						return nil, fmt.Errorf("%s: special token %q is not in special_tokens", w, e.SpecialToken.ID)
					}
					if len(st.IDs) == 0 || len(st.IDs) != len(st.Tokens) {
						return nil, fmt.Errorf("%s.special_tokens[%q]: want as many ids as tokens, and at least one", where, e.SpecialToken.ID)
					}
					out = append(out, templatePiece{special: st.IDs, tokens: st.Tokens, typeID: e.SpecialToken.TypeID,
						where: fmt.Sprintf("%s.special_tokens[%q]", where, e.SpecialToken.ID)})
				default:
					return nil, fmt.Errorf("%s: want {\"SpecialToken\": ...} or {\"Sequence\": ...}", w)
				}
			}
			return out, nil
		}
		var p postTemplate
		if p.single, err = parse(j.Single, "single"); err != nil {
			return nil, err
		}
		if p.pair, err = parse(j.Pair, "pair"); err != nil {
			return nil, err
		}
		return p, nil
	}
	return nil, unsupported(where, "post-processor", typ, "TemplateProcessing, ByteLevel, Sequence")
}
