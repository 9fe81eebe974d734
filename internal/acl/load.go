package acl

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"

	"github.com/go-viper/mapstructure/v2"
	"go.yaml.in/yaml/v3"
)

// LoadFile reads and compiles an ACL rules file in RocketMQ's plain_acl.yml
// shape (File). Unknown keys are errors; keys match without case, and
// scalars are read leniently as RocketMQ's sample files write them
// (secretKey: 12345678 is the string "12345678"). Each problem is reported
// with its field and line. The binaries, the broker and the nameserver pass
// it to NewWatcher; conf only carries the file's path (conf is a leaf).
func LoadFile(path string) (*Rules, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("acl: read ACL file: %w", err)
	}
	// NB: into any, not map[string]any: yaml drops a null key (~: 1) from
	// a map[string]any without a word, where stringKeys makes it a key
	// the decoder refuses.
	var doc any
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return nil, fmt.Errorf("acl: parse ACL file %s: %w", path, err)
	}
	var f File
	dec, err := mapstructure.NewDecoder(&mapstructure.DecoderConfig{
		Result:           &f,
		ErrorUnused:      true,
		WeaklyTypedInput: true,
		DecodeHook:       mapstructure.StringToSliceHookFunc(","),
	})
	if err != nil {
		return nil, fmt.Errorf("acl: ACL file %s: %w", path, err)
	}
	if err := dec.Decode(stringKeys(doc)); err != nil {
		return nil, fmt.Errorf("acl: ACL file %s: %w", path, err)
	}
	rules, err := Compile(f)
	if err != nil {
		addLines(data, err)
		return nil, fmt.Errorf("acl: ACL file %s:\n%w", path, err)
	}
	return rules, nil
}

// stringKeys returns v with every YAML mapping's keys made strings, as
// viper reads them: YAML allows any scalar as a key (0:, true:), and the
// decoder expects string keys (a non-string one panicked it, found by
// FuzzLoadFile). Such a key then reads as the unknown key it is.
func stringKeys(v any) any {
	switch m := v.(type) {
	case map[string]any:
		out := make(map[string]any, len(m))
		for k, e := range m {
			out[k] = stringKeys(e)
		}
		return out
	case map[any]any:
		out := make(map[string]any, len(m))
		for k, e := range m {
			out[fmt.Sprint(k)] = stringKeys(e)
		}
		return out
	case []any:
		out := make([]any, len(m))
		for i, e := range m {
			out[i] = stringKeys(e)
		}
		return out
	}
	return v
}

// addLines fills in the Line of every FieldError in err from the YAML
// document data.
func addLines(data []byte, err error) {
	var root yaml.Node
	if yaml.Unmarshal(data, &root) != nil || len(root.Content) == 0 {
		return
	}
	var errs []error
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		errs = j.Unwrap()
	} else {
		errs = []error{err}
	}
	for _, e := range errs {
		var fe *FieldError
		if errors.As(e, &fe) {
			if n := yamlAt(root.Content[0], fe.Path); n != nil {
				fe.Line = n.Line
			}
		}
	}
}

// yamlAt follows a path such as accounts[1].topicPerms[0] (keys compared
// without case, as viper reads them) and returns its node, nil if absent.
func yamlAt(n *yaml.Node, path string) *yaml.Node {
	for part := range strings.SplitSeq(path, ".") {
		key, rest, _ := strings.Cut(part, "[")
		if n = yamlKey(n, key); n == nil {
			return nil
		}
		for rest != "" {
			idx, after, _ := strings.Cut(rest, "]")
			i, err := strconv.Atoi(idx)
			if err != nil || n.Kind != yaml.SequenceNode || i < 0 || i >= len(n.Content) {
				return nil
			}
			n = n.Content[i]
			rest = strings.TrimPrefix(after, "[")
		}
	}
	return n
}

func yamlKey(n *yaml.Node, key string) *yaml.Node {
	if n.Kind != yaml.MappingNode {
		return nil
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		if strings.EqualFold(n.Content[i].Value, key) {
			return n.Content[i+1]
		}
	}
	return nil
}
