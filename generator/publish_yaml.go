package generator

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v4"
)

// The published spec is written by editing the document's YAML node tree
// (JSON is YAML), so that everything the publication does not touch keeps
// its order, quoting and comments. These are the tree's helpers.

func strNode(s string) *yaml.Node {
	return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: s}
}

func boolNode(b bool) *yaml.Node {
	return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!bool", Value: strconv.FormatBool(b)}
}

func intNode(n int64) *yaml.Node {
	return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!int", Value: strconv.FormatInt(n, 10)}
}

func seqNode(items ...*yaml.Node) *yaml.Node {
	return &yaml.Node{Kind: yaml.SequenceNode, Tag: "!!seq", Content: items}
}

// mapNode builds a mapping from key, value pairs (a value may be a string,
// a bool or a *yaml.Node; a nil node is left out).
func mapNode(kv ...any) *yaml.Node {
	m := &yaml.Node{Kind: yaml.MappingNode, Tag: "!!map"}
	for i := 0; i+1 < len(kv); i += 2 {
		var v *yaml.Node
		switch x := kv[i+1].(type) {
		case string:
			v = strNode(x)
		case bool:
			v = boolNode(x)
		case *yaml.Node:
			v = x
		}
		if v == nil {
			continue
		}
		m.Content = append(m.Content, strNode(kv[i].(string)), v)
	}
	return m
}

func refNode(ref string) *yaml.Node { return mapNode("$ref", ref) }

// get returns the value of key in mapping m, or nil.
func get(m *yaml.Node, key string) *yaml.Node {
	if m == nil || m.Kind != yaml.MappingNode {
		return nil
	}
	for i := 0; i+1 < len(m.Content); i += 2 {
		if m.Content[i].Value == key {
			return m.Content[i+1]
		}
	}
	return nil
}

// keyNode returns the key node of key in mapping m, or nil.
func keyNode(m *yaml.Node, key string) *yaml.Node {
	if m == nil || m.Kind != yaml.MappingNode {
		return nil
	}
	for i := 0; i+1 < len(m.Content); i += 2 {
		if m.Content[i].Value == key {
			return m.Content[i]
		}
	}
	return nil
}

// set adds or replaces key in mapping m.
func set(m *yaml.Node, key string, v *yaml.Node) {
	for i := 0; i+1 < len(m.Content); i += 2 {
		if m.Content[i].Value == key {
			m.Content[i+1] = v
			return
		}
	}
	m.Content = append(m.Content, strNode(key), v)
}

// mergeNode merges update into target as an OpenAPI Overlay 1.0.0 update
// action does: mappings recursively, sequences appended, anything else
// replaced. It copies nothing: update's nodes move into target.
func mergeNode(target, update *yaml.Node) {
	for i := 0; i+1 < len(update.Content); i += 2 {
		k, v := update.Content[i], update.Content[i+1]
		old := get(target, k.Value)
		switch {
		case old != nil && old.Kind == yaml.MappingNode && v.Kind == yaml.MappingNode:
			mergeNode(old, v)
		case old != nil && old.Kind == yaml.SequenceNode && v.Kind == yaml.SequenceNode:
			old.Content = append(old.Content, v.Content...)
		case old == nil && statusKey(k.Value):
			insertStatus(target, k, v)
		default:
			set(target, k.Value, v)
		}
	}
}

// statusKey reports whether a mapping key is a response status ("409").
func statusKey(s string) bool {
	return len(s) == 3 && s[0] >= '1' && s[0] <= '5' && s[1] >= '0' && s[1] <= '9' && s[2] >= '0' && s[2] <= '9'
}

// insertStatus adds a response to a responses mapping before the first
// status that is greater, so that the codes stay in order where they were.
func insertStatus(m, k, v *yaml.Node) {
	at := len(m.Content)
	for i := 0; i+1 < len(m.Content); i += 2 {
		if c := m.Content[i].Value; statusKey(c) && c > k.Value {
			at = i
			break
		}
	}
	m.Content = slices.Insert(m.Content, at, k, v)
}

// plain clears the styles the parser recorded (a JSON document's flow
// mappings and double quotes), so that a JSON input is written as block
// YAML.
func plain(n *yaml.Node) {
	n.Style = 0
	for _, c := range n.Content {
		plain(c)
	}
}

// resolve follows a local $ref ("#/components/...") from the document's
// root; nil, "" for any other reference or a dangling one. It returns the
// node and its JSONPath.
func resolve(root *yaml.Node, ref string) (*yaml.Node, string) {
	frag, ok := strings.CutPrefix(ref, "#/")
	if !ok {
		return nil, ""
	}
	n, path := root, "$"
	for _, tok := range pointerKeys(frag) {
		n = get(n, tok)
		if n == nil {
			return nil, ""
		}
		path += jsonPathStep(tok)
	}
	return n, path
}

// deref returns n, or what its local $ref points to (following at most a
// few in a row), with the JSONPath of the node returned; path is n's own.
func deref(root, n *yaml.Node, path string) (*yaml.Node, string) {
	for range 8 {
		ref := get(n, "$ref")
		if ref == nil {
			return n, path
		}
		next, p := resolve(root, ref.Value)
		if next == nil {
			return nil, ""
		}
		n, path = next, p
	}
	return nil, ""
}

var plainName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// jsonPathStep is one member step of a JSONPath (RFC 9535): .name, or
// ['name'] with quote and backslash escaped.
func jsonPathStep(name string) string {
	if plainName.MatchString(name) {
		return "." + name
	}
	return "['" + strings.NewReplacer(`\`, `\\`, `'`, `\'`).Replace(name) + "']"
}

// writeJSON writes n as indented JSON, keeping the order of mappings.
func writeJSON(n *yaml.Node) ([]byte, error) {
	var b bytes.Buffer
	if err := appendJSON(&b, n); err != nil {
		return nil, err
	}
	var out bytes.Buffer
	if err := json.Indent(&out, b.Bytes(), "", "  "); err != nil {
		return nil, err
	}
	out.WriteByte('\n')
	return out.Bytes(), nil
}

func appendJSON(b *bytes.Buffer, n *yaml.Node) error {
	switch n.Kind {
	case yaml.DocumentNode:
		if len(n.Content) != 1 {
			return fmt.Errorf("a document of %d nodes", len(n.Content))
		}
		return appendJSON(b, n.Content[0])
	case yaml.AliasNode:
		return appendJSON(b, n.Alias)
	case yaml.MappingNode:
		b.WriteByte('{')
		for i := 0; i+1 < len(n.Content); i += 2 {
			if i > 0 {
				b.WriteByte(',')
			}
			k, _ := json.Marshal(n.Content[i].Value)
			b.Write(k)
			b.WriteByte(':')
			if err := appendJSON(b, n.Content[i+1]); err != nil {
				return err
			}
		}
		b.WriteByte('}')
	case yaml.SequenceNode:
		b.WriteByte('[')
		for i, c := range n.Content {
			if i > 0 {
				b.WriteByte(',')
			}
			if err := appendJSON(b, c); err != nil {
				return err
			}
		}
		b.WriteByte(']')
	case yaml.ScalarNode:
		var v any
		if err := n.Decode(&v); err != nil {
			return fmt.Errorf("line %d: %w", n.Line, err)
		}
		switch v.(type) {
		case nil, bool, string, int, int64, uint64, float64:
		default:
			v = n.Value // a timestamp, say: its text
		}
		data, err := json.Marshal(v)
		if err != nil {
			return fmt.Errorf("line %d: %w", n.Line, err)
		}
		b.Write(data)
	}
	return nil
}

// jsonToNode reads a JSON document into a node tree, keeping the order of
// objects: the fallback for JSON that the YAML parser refuses (it does not
// take the UTF-16 surrogate pairs JSON escapes characters outside the BMP
// with, e.g. "\ud83d\udc4d"). Its nodes have no positions.
func jsonToNode(data []byte) (*yaml.Node, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	n, err := jsonValue(dec)
	if err != nil {
		return nil, err
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, fmt.Errorf("data after the JSON document")
	}
	return &yaml.Node{Kind: yaml.DocumentNode, Content: []*yaml.Node{n}}, nil
}

func jsonValue(dec *json.Decoder) (*yaml.Node, error) {
	tok, err := dec.Token()
	if err != nil {
		return nil, err
	}
	switch v := tok.(type) {
	case json.Delim:
		if v == '{' {
			m := mapNode()
			for dec.More() {
				k, err := dec.Token()
				if err != nil {
					return nil, err
				}
				key, _ := k.(string)
				val, err := jsonValue(dec)
				if err != nil {
					return nil, err
				}
				m.Content = append(m.Content, strNode(key), val)
			}
			_, err := dec.Token()
			return m, err
		}
		s := seqNode()
		for dec.More() {
			val, err := jsonValue(dec)
			if err != nil {
				return nil, err
			}
			s.Content = append(s.Content, val)
		}
		_, err := dec.Token()
		return s, err
	case string:
		return strNode(v), nil
	case json.Number:
		tag := "!!int"
		if strings.ContainsAny(string(v), ".eE") {
			tag = "!!float"
		}
		return &yaml.Node{Kind: yaml.ScalarNode, Tag: tag, Value: string(v)}, nil
	case bool:
		return boolNode(v), nil
	}
	return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!null", Value: "null"}, nil
}
