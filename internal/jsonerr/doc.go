// Package jsonerr says encoding/json's errors in the terms of the file that was read, for people: where a
// syntax error is (line and column) and which key holds a value of the wrong JSON type, instead of Go's
// "invalid character ..." alone or "cannot unmarshal string into Go struct field hfConfig.hidden_size of type
// int".
//
//	if err := json.Unmarshal(data, &cfg); err != nil {
//		return badinput.Errorf("%s: %w; fix the file, or replace it with the model's own", path, jsonerr.Describe(data, err))
//	}
//
// loaders.DescribeJSONError is Describe; this package holds it so that the packages below loaders
// (tokenizers) share it.
package jsonerr
