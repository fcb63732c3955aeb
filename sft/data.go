package sft

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/ardanlabs/jinja"

	"github.com/tune-ml/tune/chat"
	"github.com/tune-ml/tune/internal/badinput"
	"github.com/tune-ml/tune/internal/smallfile"
	"github.com/tune-ml/tune/loaders"
	"github.com/tune-ml/tune/tokenizers"
)

// Data formats (Options.Format), TRL's dataset types.
const (
	FormatText             = "text"
	FormatPromptCompletion = "prompt_completion"
	FormatMessages         = "messages"
)

// DefaultMaxLength is TRL's SFTConfig.max_length default.
const DefaultMaxLength = 1024

// IgnoreIndex is the label of tokens that are not supervised (PyTorch's cross_entropy ignore_index).
const IgnoreIndex = -100

// Roles are the message roles the data may use.
var Roles = []string{"system", "user", "assistant", "tool", "developer"}

// Options are the SFT data settings; the names are TRL SFTConfig's.
type Options struct {
	// Format is "text", "prompt_completion" or "messages"; "" detects it from the first record's keys.
	Format string
	// DatasetTextField is the key of the text in "text" data ("text" when empty).
	DatasetTextField string
	// MaxLength cuts longer examples (packed rows hold at most this many tokens); 0 means DefaultMaxLength,
	// a negative value no limit.
	MaxLength int
	// CompletionOnlyLoss supervises only the completion of prompt-completion data (TRL's default, nil = true).
	CompletionOnlyLoss *bool
	// AssistantOnlyLoss supervises only the assistant turns of messages data. nil means true here; TRL's
	// default is false (the whole conversation is supervised there unless assistant_only_loss is set).
	AssistantOnlyLoss *bool
	// Packing packs several examples per row (best-fit decreasing).
	Packing bool
}

func (o Options) maxLength() int {
	switch {
	case o.MaxLength == 0:
		return DefaultMaxLength
	case o.MaxLength < 0:
		return int(^uint(0) >> 1)
	}
	return o.MaxLength
}

// Tokenizer is what the data needs from a model's tokenizer files.
type Tokenizer struct {
	// Tok encodes text (tokenizers.LoadForTransformers gives transformers' ids).
	Tok *tokenizers.Tokenizer
	// Config gives the EOS token (tokenizer_config.json); nil or an empty eos_token: no EOS is appended.
	Config *tokenizers.Config
	// Template renders messages; nil refuses conversational data.
	Template *chat.Template
}

// Example is one tokenized example.
type Example struct {
	// InputIDs are the token ids.
	InputIDs []int32
	// Labels is InputIDs where supervised, IgnoreIndex elsewhere.
	Labels []int32
	// Line is the example's line in its file.
	Line int
}

// Dataset is the tokenized examples of one file.
type Dataset struct {
	// Path is the file read.
	Path string
	// Format is the data format, given or detected.
	Format string
	// Examples are the file's examples in file order.
	Examples []Example
	// Truncated counts the examples cut to MaxLength.
	Truncated int
	// MaxLength is the limit the examples were cut to.
	MaxLength int
	// Unsupervised counts the examples left out because truncation to MaxLength kept none of their
	// supervised tokens (a prompt longer than max_length); UnsupervisedLine is the first one's line.
	Unsupervised, UnsupervisedLine int
}

// Summary is a one-line account of the dataset ("train.jsonl: 120 messages examples, 3 cut to 1024 tokens").
func (d *Dataset) Summary() string {
	s := fmt.Sprintf("%s: %d %s examples", d.Path, len(d.Examples), d.Format)
	if d.Truncated > 0 {
		s += fmt.Sprintf(", %d cut to max_length %d tokens", d.Truncated, d.MaxLength)
	}
	if d.Unsupervised > 0 {
		s += fmt.Sprintf("; %d left out: their supervised part starts beyond max_length %d (the first at %s:%d; "+
			"TRL would train on them without a loss)", d.Unsupervised, d.MaxLength, d.Path, d.UnsupervisedLine)
	}
	return s
}

// Load reads a JSONL file of SFT examples and tokenizes them.
func Load(path string, tk Tokenizer, opts Options) (*Dataset, error) {
	f, err := smallfile.Open(path, "a data file") // a named pipe would be waited on for ever
	if err != nil {
		return nil, fmt.Errorf("sft: %w", err)
	}
	defer f.Close()
	return Read(f, path, tk, opts)
}

// Read is Load on an open file; name is used in errors.
func Read(r io.Reader, name string, tk Tokenizer, opts Options) (*Dataset, error) {
	ds, err := readData(r, name, tk, opts)
	return ds, badinput.Mark(err) // a row, the format or the chat template is wrong (exit 2); a read error is not
}

// readData is Read without the bad-input mark.
func readData(r io.Reader, name string, tk Tokenizer, opts Options) (*Dataset, error) {
	if tk.Tok == nil {
		return nil, errors.New("sft: no tokenizer")
	}
	switch opts.Format {
	case "", FormatText, FormatPromptCompletion, FormatMessages:
	default:
		return nil, fmt.Errorf("sft: data format %q is not text, prompt_completion or messages", opts.Format)
	}
	p := &preparer{tk: tk, opts: opts, name: name, textField: opts.DatasetTextField}
	if p.textField == "" {
		p.textField = "text"
	}
	if tk.Config != nil && tk.Config.EOSToken != "" {
		id, ok := tk.Tok.TokenID(tk.Config.EOSToken)
		if !ok {
			return nil, fmt.Errorf("sft: eos_token %q of %s is not in the tokenizer's vocabulary", tk.Config.EOSToken, tk.Config.Path)
		}
		p.eos = id
		p.hasEOS = true
	}
	ds := &Dataset{Path: name, Format: opts.Format, MaxLength: opts.maxLength()}
	lr := loaders.NewLineReader(r, name, 0) // bounded lines (1 MiB), UTF-8 checked, file:line errors
	for {
		raw, line, err := lr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("sft: %w", err)
		}
		if t := bytes.TrimSpace(raw); len(t) > 0 {
			if ds.Format == "" {
				p.detectedLine = line // prepare detects the format from this record
			}
			ex, cut, perr := p.prepare(t, &ds.Format)
			if perr != nil {
				return nil, fmt.Errorf("sft: %s:%d: %w", name, line, perr)
			}
			ex.Line = line
			if cut {
				ds.Truncated++
			}
			if !slices.ContainsFunc(ex.Labels, func(l int32) bool { return l != IgnoreIndex }) {
				if cut {
					// A prompt longer than max_length: the example is left out (and counted in the summary)
					// rather than stopping the run; most of the file so is an error below.
					if ds.Unsupervised++; ds.Unsupervised == 1 {
						ds.UnsupervisedLine = line
					}
					ds.Truncated--
					continue
				}
				return nil, fmt.Errorf("sft: %s:%d: the example has no supervised token", name, line)
			}
			ds.Examples = append(ds.Examples, ex)
		}
	}
	if ds.Unsupervised > 0 && ds.Unsupervised >= len(ds.Examples) {
		return nil, fmt.Errorf("sft: %s:%d: the example has no supervised token after truncation to max_length %d (its "+
			"supervised part starts beyond it), and so have %d of the file's %d examples; raise max_length or shorten the prompts",
			name, ds.UnsupervisedLine, ds.MaxLength, ds.Unsupervised, ds.Unsupervised+len(ds.Examples))
	}
	if len(ds.Examples) == 0 {
		return nil, fmt.Errorf("sft: %s holds no examples", name)
	}
	return ds, nil
}

// preparer tokenizes records.
type preparer struct {
	tk        Tokenizer
	opts      Options
	name      string
	textField string
	eos       int32
	hasEOS    bool
	// detectedLine is the line of the record the format was detected from; 0 when Options.Format gave it.
	detectedLine int
	// renders counts the chat-template renderings (tests check that a long conversation costs a number
	// bounded by max_length, not by its turns).
	renders int
}

// prepare tokenizes one JSON record; format is detected on the first record when empty.
func (p *preparer) prepare(raw []byte, format *string) (Example, bool, error) {
	var rec map[string]json.RawMessage
	if err := json.Unmarshal(raw, &rec); err != nil {
		return Example{}, false, fmt.Errorf("not a JSON object: %v", err)
	}
	if *format == "" {
		switch {
		case rec["messages"] != nil:
			*format = FormatMessages
		case rec["prompt"] != nil && rec["completion"] != nil:
			*format = FormatPromptCompletion
		case rec[p.textField] != nil:
			*format = FormatText
		default:
			return Example{}, false, fmt.Errorf("cannot tell the data format: the record has none of the keys %q, \"prompt\"+\"completion\" or \"messages\" (keys: %s)", p.textField, keysOf(rec))
		}
	}
	if want := formatKey(*format, p.textField); rec[want] == nil {
		how := "as the data format says"
		if p.detectedLine > 0 {
			how = fmt.Sprintf("detected from line %d", p.detectedLine)
		}
		return Example{}, false, fmt.Errorf("the record has no %q (keys: %s), but the file's format is %s, %s: "+
			"every line of a file must use the same format", want, keysOf(rec), *format, how)
	}
	var ids []int32
	var sup []bool
	var err error
	switch *format {
	case FormatText:
		ids, sup, err = p.text(rec)
	case FormatPromptCompletion:
		ids, sup, err = p.promptCompletion(rec)
	case FormatMessages:
		ids, sup, err = p.messages(rec)
	}
	if err != nil {
		return Example{}, false, err
	}
	cut := false
	if m := p.opts.maxLength(); len(ids) > m {
		ids, sup, cut = ids[:m], sup[:m], true
	}
	labels := make([]int32, len(ids))
	for i, id := range ids {
		labels[i] = IgnoreIndex
		if sup[i] {
			labels[i] = id
		}
	}
	return Example{InputIDs: ids, Labels: labels}, cut, nil
}

// formatKey is the key a record of format must hold: "messages", "prompt" (with "completion", checked with
// its value), or the text field.
func formatKey(format, textField string) string {
	switch format {
	case FormatMessages:
		return "messages"
	case FormatPromptCompletion:
		return "prompt"
	}
	return textField
}

func keysOf(rec map[string]json.RawMessage) string {
	var ks []string
	for k := range rec {
		ks = append(ks, fmt.Sprintf("%q", k))
	}
	slices.Sort(ks)
	return strings.Join(ks, ", ")
}

func stringField(rec map[string]json.RawMessage, key string) (string, error) {
	raw, ok := rec[key]
	if !ok {
		return "", fmt.Errorf("no %q key", key)
	}
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		return "", fmt.Errorf("%q must be a string", key)
	}
	return s, nil
}

// withEOS appends the EOS id (supervised) unless ids already end with it.
func (p *preparer) withEOS(ids []int32, sup []bool) ([]int32, []bool) {
	if p.hasEOS && (len(ids) == 0 || ids[len(ids)-1] != p.eos) {
		return append(ids, p.eos), append(sup, true)
	}
	if p.hasEOS {
		sup[len(sup)-1] = true
	}
	return ids, sup
}

func (p *preparer) text(rec map[string]json.RawMessage) ([]int32, []bool, error) {
	s, err := stringField(rec, p.textField)
	if err != nil {
		return nil, nil, err
	}
	ids, err := p.tk.Tok.Encode(s, true)
	if err != nil {
		return nil, nil, err
	}
	sup := make([]bool, len(ids))
	for i := range sup {
		sup[i] = true
	}
	ids, sup = p.withEOS(ids, sup)
	return ids, sup, nil
}

// leadingSpecials is how many ids the post-processor puts before the text (a BOS).
func (p *preparer) leadingSpecials() int {
	const sentinel = -7
	ids, _ := p.tk.Tok.Process([]int32{sentinel}, nil, false, true)
	return slices.Index(ids, sentinel)
}

func (p *preparer) promptCompletion(rec map[string]json.RawMessage) ([]int32, []bool, error) {
	completionOnly := p.opts.CompletionOnlyLoss == nil || *p.opts.CompletionOnlyLoss
	if b := bytes.TrimSpace(rec["prompt"]); len(b) > 0 && b[0] == '[' {
		return p.conversationalPromptCompletion(rec, completionOnly)
	}
	prompt, err := stringField(rec, "prompt")
	if err != nil {
		return nil, nil, err
	}
	completion, err := stringField(rec, "completion")
	if err != nil {
		return nil, nil, err
	}
	pre, err := p.tk.Tok.Encode(prompt, false)
	if err != nil {
		return nil, nil, fmt.Errorf("prompt: %w", err)
	}
	full, err := p.tk.Tok.Encode(prompt+completion, false)
	if err != nil {
		return nil, nil, fmt.Errorf("completion: %w", err)
	}
	ids, _ := p.tk.Tok.Process(full, nil, false, true)
	start := p.leadingSpecials() + len(pre)
	sup := make([]bool, len(ids))
	for i := range sup {
		sup[i] = !completionOnly || i >= start
	}
	ids, sup = p.withEOS(ids, sup)
	return ids, sup, nil
}

// contentOf returns a message's content string ("" when it has none).
func contentOf(m jinja.Value) string {
	if !m.IsDict() {
		return ""
	}
	c, ok := m.AsDict().Get("content")
	if !ok || !c.IsString() {
		return ""
	}
	return c.AsString()
}

// excerpt is up to 40 bytes of s from byte i, cut at a rune boundary.
func excerpt(s string, i int) string {
	s = s[min(i, len(s)):]
	if len(s) > 40 {
		s = strings.ToValidUTF8(s[:40], "")
	}
	return s
}

// commonPrefix is the length in bytes of the longest common prefix of a and b.
func commonPrefix(a, b string) int {
	n := 0
	for n < len(a) && n < len(b) && a[n] == b[n] {
		n++
	}
	return n
}

// message parses and checks one message.
func message(raw json.RawMessage, where string) (jinja.Value, string, error) {
	var m struct {
		Role    *string         `json:"role"`
		Content json.RawMessage `json:"content"`
	}
	if err := json.Unmarshal(raw, &m); err != nil {
		return jinja.Value{}, "", fmt.Errorf("%s: want an object {\"role\", \"content\"}: %v", where, err)
	}
	if m.Role == nil {
		return jinja.Value{}, "", fmt.Errorf("%s: no \"role\"", where)
	}
	if !slices.Contains(Roles, *m.Role) {
		return jinja.Value{}, "", fmt.Errorf("%s: unknown role %q (roles are %s)", where, *m.Role, strings.Join(Roles, ", "))
	}
	if len(m.Content) > 0 && m.Content[0] != '"' && string(m.Content) != "null" {
		return jinja.Value{}, "", fmt.Errorf("%s: \"content\" must be a string (lists of content parts are not supported)", where)
	}
	v, err := chat.ParseJSON(raw)
	if err != nil {
		return jinja.Value{}, "", fmt.Errorf("%s: %v", where, err)
	}
	return v, *m.Role, nil
}

func messageList(raw json.RawMessage, key string) ([]jinja.Value, []string, error) {
	var list []json.RawMessage
	if err := json.Unmarshal(raw, &list); err != nil {
		return nil, nil, fmt.Errorf("%q must be a list of messages", key)
	}
	if len(list) == 0 {
		return nil, nil, fmt.Errorf("%q is empty", key)
	}
	vals := make([]jinja.Value, len(list))
	roles := make([]string, len(list))
	for i, r := range list {
		v, role, err := message(r, fmt.Sprintf("%s[%d]", key, i))
		if err != nil {
			return nil, nil, err
		}
		vals[i], roles[i] = v, role
	}
	return vals, roles, nil
}

// render renders and tokenizes msgs as apply_chat_template(tokenize=True) does (no special tokens added).
func (p *preparer) render(msgs []jinja.Value, gen bool) ([]int32, error) {
	text, err := p.renderText(msgs, gen)
	if err != nil {
		return nil, err
	}
	return p.tk.Tok.Encode(text, false)
}

func (p *preparer) renderText(msgs []jinja.Value, gen bool) (string, error) {
	p.renders++
	if p.tk.Template == nil {
		return "", errors.New("conversational data needs a chat template (tokenizer_config.json chat_template or chat_template.jinja)")
	}
	return p.tk.Template.Render(msgs, chat.Options{AddGenerationPrompt: gen})
}

// span marks as supervised the tokens of ids (the tokens of full) that hold the text between the renderings
// before (the conversation up to the turn, with the generation prompt) and through (up to and with the turn).
// When the tokens of both renderings are prefixes of ids (the usual case: chat templates put special tokens
// at turn boundaries) the span is exact. Otherwise the span's text runs from where before stops agreeing with
// full to where through does (a template may end its generation prompt differently from the turn, as one
// that writes a newline after every {{ }} does), and a token belongs to it when the text the ids up to it
// decode to ends inside the span. That is only done when the conversation before the turn renders as the
// start of full, up to its generation prompt: plain returns the rendering of the same messages without the
// generation prompt, and before may differ from full only after the point where it leaves plain. A template
// that renders earlier turns differently when later ones follow (Mistral's puts the system message into the
// last user turn) is refused: the span would start at the first difference and supervise user and system text.
func (p *preparer) span(ids []int32, sup []bool, full, before, through, content string, plain func() (string, error)) error {
	b, err := p.tk.Tok.Encode(before, false)
	if err != nil {
		return err
	}
	t, err := p.tk.Tok.Encode(through, false)
	if err != nil {
		return err
	}
	if len(b) <= len(t) && slices.Equal(t[:len(b)], b) && len(t) <= len(ids) && slices.Equal(ids[:len(t)], t) {
		for k := len(b); k < len(t); k++ {
			sup[k] = true
		}
		return nil
	}
	start, end := commonPrefix(before, full), commonPrefix(through, full)
	pl, err := plain()
	if err != nil {
		return err
	}
	if gen := commonPrefix(before, pl); start < gen {
		return fmt.Errorf("the chat template renders the conversation before this assistant turn differently when later "+
			"turns follow (at byte %d: %q alone, %q in the whole conversation), so the turn's tokens cannot be told apart "+
			"from the user's and the system's; set assistant_only_loss false to supervise the whole conversation, or use a "+
			"template whose renderings of a conversation's beginnings are prefixes of the whole", start, excerpt(before, start), excerpt(full, start))
	}
	if end < len(through) && content != "" {
		// The turn renders differently as the last one (Qwen3 adds an empty think block there and strips
		// think blocks from earlier turns): find its content in the conversation and end the span after the
		// text the template puts after the content (the end-of-turn tokens).
		k := strings.LastIndex(through, content)
		j := strings.Index(full[start:], content)
		if k >= 0 && j >= 0 {
			e := start + j + len(content)
			end = e + commonPrefix(through[k+len(content):], full[e:])
		}
	}
	if p.tk.Tok.Decode(ids, false) != full {
		return errors.New("the chat template renders this assistant turn differently inside the whole conversation and the tokenizer does not decode the conversation back to its text, so the turn's tokens cannot be told apart; set assistant_only_loss false to supervise the whole conversation")
	}
	if end <= start {
		return errors.New("the chat template renders this assistant turn differently inside the whole conversation, so its tokens cannot be told apart; set assistant_only_loss false to supervise the whole conversation")
	}
	prev := 0
	// Tokens past max_length are cut from the example (prepare), so their labels do not matter; decoding
	// every prefix of a longer conversation would cost its length squared.
	for k := range ids[:min(len(ids), p.opts.maxLength())] {
		pos := len(p.tk.Tok.Decode(ids[:k+1], false))
		if pos > start && prev < end {
			sup[k] = true
		}
		prev = pos
	}
	return nil
}

func (p *preparer) conversationalPromptCompletion(rec map[string]json.RawMessage, completionOnly bool) ([]int32, []bool, error) {
	prompt, _, err := messageList(rec["prompt"], "prompt")
	if err != nil {
		return nil, nil, err
	}
	completion, _, err := messageList(rec["completion"], "completion")
	if err != nil {
		return nil, nil, err
	}
	before, err := p.renderText(prompt, true)
	if err != nil {
		return nil, nil, err
	}
	full, err := p.renderText(append(slices.Clone(prompt), completion...), false)
	if err != nil {
		return nil, nil, err
	}
	ids, err := p.tk.Tok.Encode(full, false)
	if err != nil {
		return nil, nil, err
	}
	sup := make([]bool, len(ids))
	if !completionOnly {
		for i := range sup {
			sup[i] = true
		}
		return ids, sup, nil
	}
	plain := func() (string, error) { return p.renderText(prompt, false) }
	if err := p.span(ids, sup, full, before, full, "", plain); err != nil {
		return nil, nil, fmt.Errorf("completion: %w", err)
	}
	return ids, sup, nil
}

func (p *preparer) messages(rec map[string]json.RawMessage) ([]int32, []bool, error) {
	msgs, roles, err := messageList(rec["messages"], "messages")
	if err != nil {
		return nil, nil, err
	}
	full, err := p.renderText(msgs, false)
	if err != nil {
		return nil, nil, err
	}
	ids, err := p.tk.Tok.Encode(full, false)
	if err != nil {
		return nil, nil, err
	}
	sup := make([]bool, len(ids))
	if p.opts.AssistantOnlyLoss != nil && !*p.opts.AssistantOnlyLoss {
		for i := range sup {
			sup[i] = true
		}
		return ids, sup, nil
	}
	if !slices.Contains(roles, "assistant") {
		return nil, nil, errors.New("the conversation has no assistant message, so nothing is supervised (assistant_only_loss)")
	}
	// Finding a turn renders the conversation up to it, so a conversation of n turns costs n renderings of
	// up to n turns. prepare keeps only the first max_length tokens: once a turn starts past them (in tokens,
	// and in the text those tokens decode to, which is where span's inexact path places it), neither it nor
	// any later turn has a token left to supervise, and the loop stops there.
	m := p.opts.maxLength()
	cutText := -1 // bytes of full that the first m tokens hold
	for i, role := range roles {
		if role != "assistant" {
			continue
		}
		before, err := p.renderText(msgs[:i], true)
		if err != nil {
			return nil, nil, err
		}
		if len(ids) > m {
			if cutText < 0 {
				cutText = len(p.tk.Tok.Decode(ids[:m], false))
			}
			if commonPrefix(before, full) >= cutText {
				if b, err := p.tk.Tok.Encode(before, false); err == nil && len(b) >= m {
					break
				}
			}
		}
		through, err := p.renderText(msgs[:i+1], false)
		if err != nil {
			return nil, nil, err
		}
		plain := func() (string, error) { return p.renderText(msgs[:i], false) }
		if err := p.span(ids, sup, full, before, through, contentOf(msgs[i]), plain); err != nil {
			return nil, nil, fmt.Errorf("messages[%d]: %w", i, err)
		}
	}
	return ids, sup, nil
}
