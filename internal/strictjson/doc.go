// Package strictjson decodes JSON whose keys must be spelled exactly as the writer spells them.
//
// encoding/json matches an object key to a struct field case-insensitively, so {"voCAB": ...} fills the
// field tagged "vocab". Files that Hugging Face libraries write (tokenizer.json, tokenizer_config.json) are
// read by serde and Python, which match keys exactly; Unmarshal decodes as encoding/json does and then refuses
// a key that names a field only when case is ignored, naming the key, where it is, and the spelling it should
// have. Keys that name no field at all are left alone (serde ignores unknown keys by default).
//
//	var tj tokenizerJSON
//	if err := strictjson.Unmarshal(data, &tj); err != nil {
//		return fmt.Errorf("%s: %w", path, err) // `model: key "voCAB" is not spelled as "vocab" (keys are case-sensitive)`
//	}
package strictjson
