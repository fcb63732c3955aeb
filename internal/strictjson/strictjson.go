package strictjson

import (
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
)

// Unmarshal decodes data into v (a pointer) as json.Unmarshal does, then checks every object key decoded into
// a struct, at any depth (through pointers, slices, arrays and maps): a key that is not the exact JSON name of a
// field but equals one when case is ignored is an error naming the key's path ("model.voCAB") and the right
// spelling. Types that implement json.Unmarshaler decode themselves and are not looked into.
func Unmarshal(data []byte, v any) error {
	if err := json.Unmarshal(data, v); err != nil {
		return err
	}
	return check(data, reflect.TypeOf(v), "")
}

var unmarshaler = reflect.TypeFor[json.Unmarshaler]()

func check(raw []byte, t reflect.Type, path string) error {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if reflect.PointerTo(t).Implements(unmarshaler) || t.Implements(unmarshaler) {
		return nil
	}
	switch t.Kind() {
	case reflect.Struct:
		var obj map[string]json.RawMessage
		if json.Unmarshal(raw, &obj) != nil {
			return nil // null, or not an object: json.Unmarshal has judged it
		}
		fields := jsonFields(t)
		for key, val := range obj {
			if ft, ok := fields[key]; ok {
				if err := check(val, ft, join(path, key)); err != nil {
					return err
				}
				continue
			}
			for name := range fields {
				if strings.EqualFold(name, key) {
					where := ""
					if path != "" {
						where = path + ": "
					}
					return fmt.Errorf("%skey %q is not spelled as %q (keys are case-sensitive)", where, key, name)
				}
			}
		}
	case reflect.Slice, reflect.Array:
		if t.Elem().Kind() == reflect.Uint8 {
			return nil // []byte, json.RawMessage
		}
		var items []json.RawMessage
		if json.Unmarshal(raw, &items) != nil {
			return nil
		}
		for i, it := range items {
			if err := check(it, t.Elem(), fmt.Sprintf("%s[%d]", path, i)); err != nil {
				return err
			}
		}
	case reflect.Map:
		var obj map[string]json.RawMessage
		if json.Unmarshal(raw, &obj) != nil {
			return nil
		}
		for key, val := range obj {
			if err := check(val, t.Elem(), fmt.Sprintf("%s[%q]", path, key)); err != nil {
				return err
			}
		}
	}
	return nil
}

func join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

// jsonFields maps the JSON names of t's exported fields (the tag's name, else the field's) to their types;
// fields of embedded structs without a tag are promoted, as encoding/json does.
func jsonFields(t reflect.Type) map[string]reflect.Type {
	out := map[string]reflect.Type{}
	for f := range t.Fields() {
		tag := f.Tag.Get("json")
		if tag == "-" {
			continue
		}
		name, _, _ := strings.Cut(tag, ",")
		if f.Anonymous && name == "" {
			ft := f.Type
			if ft.Kind() == reflect.Pointer {
				ft = ft.Elem()
			}
			if ft.Kind() == reflect.Struct {
				for k, v := range jsonFields(ft) {
					if _, ok := out[k]; !ok {
						out[k] = v
					}
				}
				continue
			}
		}
		if !f.IsExported() {
			continue
		}
		if name == "" {
			name = f.Name
		}
		out[name] = f.Type
	}
	return out
}
