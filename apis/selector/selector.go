// Package selector parses and evaluates label selectors in Calico's syntax, the syntax tabby's
// IPPool.nodeSelector and BGPPeer.nodeSelector/peerSelector are written in:
//
//	all()                      every node
//	has(tabby.dev/rr)          the label is present
//	!has(k)                    absent
//	k == 'v', k != 'v'         equal / not equal (a missing label is not equal)
//	k in {'a', 'b'}, k not in {'a'}
//	expr && expr, expr || expr, !expr, ( expr )
//
// The empty string selects every node, like all().
package selector

import (
	"fmt"
	"slices"
	"strings"
	"unicode"
)

// Selector matches a set of labels.
type Selector interface {
	Matches(labels map[string]string) bool
	// String is the selector in canonical form: Parse reads it back as the same selector.
	String() string
}

// Parse parses a selector expression. Errors name the offset and what was expected.
func Parse(expr string) (Selector, error) {
	p := &parser{src: expr}
	p.skipSpace()
	if p.pos == len(p.src) {
		return allSel{}, nil
	}
	s, err := p.parseOr()
	if err != nil {
		return nil, err
	}
	p.skipSpace()
	if p.pos != len(p.src) {
		return nil, p.errorf("unexpected %q", p.src[p.pos:])
	}
	return s, nil
}

// MustParse is Parse for selectors written in code.
func MustParse(expr string) Selector {
	s, err := Parse(expr)
	if err != nil {
		panic(err)
	}
	return s
}

type parser struct {
	src string
	pos int
}

func (p *parser) errorf(format string, args ...any) error {
	return fmt.Errorf("selector %q at offset %d: %s", p.src, p.pos, fmt.Sprintf(format, args...))
}

func (p *parser) skipSpace() {
	for p.pos < len(p.src) && unicode.IsSpace(rune(p.src[p.pos])) {
		p.pos++
	}
}

func (p *parser) consume(tok string) bool {
	p.skipSpace()
	if strings.HasPrefix(p.src[p.pos:], tok) {
		p.pos += len(tok)
		return true
	}
	return false
}

func (p *parser) parseOr() (Selector, error) {
	left, err := p.parseAnd()
	if err != nil {
		return nil, err
	}
	for p.consume("||") {
		right, err := p.parseAnd()
		if err != nil {
			return nil, err
		}
		left = orSel{left, right}
	}
	return left, nil
}

func (p *parser) parseAnd() (Selector, error) {
	left, err := p.parseUnary()
	if err != nil {
		return nil, err
	}
	for p.consume("&&") {
		right, err := p.parseUnary()
		if err != nil {
			return nil, err
		}
		left = andSel{left, right}
	}
	return left, nil
}

func (p *parser) parseUnary() (Selector, error) {
	p.skipSpace()
	if p.pos < len(p.src) && p.src[p.pos] == '!' && !strings.HasPrefix(p.src[p.pos:], "!=") {
		p.pos++
		inner, err := p.parseUnary()
		if err != nil {
			return nil, err
		}
		return notSel{inner}, nil
	}
	if p.consume("(") {
		inner, err := p.parseOr()
		if err != nil {
			return nil, err
		}
		if !p.consume(")") {
			return nil, p.errorf("expected ')'")
		}
		return inner, nil
	}
	if p.consume("all()") {
		return allSel{}, nil
	}
	if p.consume("has(") {
		key, err := p.parseKey()
		if err != nil {
			return nil, err
		}
		if !p.consume(")") {
			return nil, p.errorf("expected ')' after has(%s", key)
		}
		return hasSel{key}, nil
	}
	key, err := p.parseKey()
	if err != nil {
		return nil, err
	}
	switch {
	case p.consume("=="):
		v, err := p.parseString()
		if err != nil {
			return nil, err
		}
		return eqSel{key, v}, nil
	case p.consume("!="):
		v, err := p.parseString()
		if err != nil {
			return nil, err
		}
		return notSel{eqSel{key, v}}, nil
	case p.consume("not in"):
		set, err := p.parseSet()
		if err != nil {
			return nil, err
		}
		return notSel{inSel{key, set}}, nil
	case p.consume("in"):
		set, err := p.parseSet()
		if err != nil {
			return nil, err
		}
		return inSel{key, set}, nil
	}
	return nil, p.errorf("expected ==, !=, in or not in after label %q", key)
}

// parseKey reads a label key: [prefix/]name with the characters Kubernetes allows.
func (p *parser) parseKey() (string, error) {
	p.skipSpace()
	start := p.pos
	for p.pos < len(p.src) {
		c := p.src[p.pos]
		if c == '-' || c == '_' || c == '.' || c == '/' || (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') {
			p.pos++
			continue
		}
		break
	}
	if start == p.pos {
		return "", p.errorf("expected a label key")
	}
	return p.src[start:p.pos], nil
}

func (p *parser) parseString() (string, error) {
	p.skipSpace()
	if p.pos >= len(p.src) || (p.src[p.pos] != '\'' && p.src[p.pos] != '"') {
		return "", p.errorf("expected a quoted value")
	}
	quote := p.src[p.pos]
	end := strings.IndexByte(p.src[p.pos+1:], quote)
	if end < 0 {
		return "", p.errorf("unterminated string")
	}
	v := p.src[p.pos+1 : p.pos+1+end]
	p.pos += end + 2
	return v, nil
}

func (p *parser) parseSet() (map[string]bool, error) {
	if !p.consume("{") {
		return nil, p.errorf("expected '{'")
	}
	set := map[string]bool{}
	if p.consume("}") {
		return set, nil
	}
	for {
		v, err := p.parseString()
		if err != nil {
			return nil, err
		}
		set[v] = true
		if p.consume("}") {
			return set, nil
		}
		if !p.consume(",") {
			return nil, p.errorf("expected ',' or '}'")
		}
	}
}

type allSel struct{}

func (allSel) Matches(map[string]string) bool { return true }
func (allSel) String() string                 { return "all()" }

type hasSel struct{ key string }

func (s hasSel) Matches(l map[string]string) bool { _, ok := l[s.key]; return ok }
func (s hasSel) String() string                   { return "has(" + s.key + ")" }

type eqSel struct{ key, value string }

func (s eqSel) Matches(l map[string]string) bool {
	v, ok := l[s.key]
	return ok && v == s.value
}
func (s eqSel) String() string { return s.key + " == " + quote(s.value) }

type inSel struct {
	key string
	set map[string]bool
}

func (s inSel) Matches(l map[string]string) bool {
	v, ok := l[s.key]
	return ok && s.set[v]
}
func (s inSel) String() string {
	vals := make([]string, 0, len(s.set))
	for v := range s.set {
		vals = append(vals, quote(v))
	}
	slices.Sort(vals)
	return s.key + " in {" + strings.Join(vals, ", ") + "}"
}

// quote writes a value so that Parse reads it back: in single quotes unless it holds one (a
// value never holds both: Parse ends a value at its first closing quote).
func quote(v string) string {
	if strings.Contains(v, "'") {
		return `"` + v + `"`
	}
	return "'" + v + "'"
}

type notSel struct{ inner Selector }

func (s notSel) Matches(l map[string]string) bool { return !s.inner.Matches(l) }
func (s notSel) String() string                   { return "!(" + s.inner.String() + ")" }

type andSel struct{ a, b Selector }

func (s andSel) Matches(l map[string]string) bool { return s.a.Matches(l) && s.b.Matches(l) }
func (s andSel) String() string                   { return "(" + s.a.String() + " && " + s.b.String() + ")" }

type orSel struct{ a, b Selector }

func (s orSel) Matches(l map[string]string) bool { return s.a.Matches(l) || s.b.Matches(l) }
func (s orSel) String() string                   { return "(" + s.a.String() + " || " + s.b.String() + ")" }
