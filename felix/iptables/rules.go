package iptables

import (
	"errors"
	"fmt"
	"strings"
)

// splitRule splits a rule into arguments the way iptables-restore does: blanks separate,
// double quotes group (a comment with spaces), a backslash escapes the next character.
func splitRule(s string) ([]string, error) {
	var (
		args    []string
		cur     strings.Builder
		inArg   bool
		inQuote bool
	)
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '\\' && i+1 < len(s):
			i++
			cur.WriteByte(s[i])
			inArg = true
		case c == '"':
			inQuote = !inQuote
			inArg = true
		case !inQuote && (c == ' ' || c == '\t'):
			if inArg {
				args = append(args, cur.String())
				cur.Reset()
				inArg = false
			}
		case c == '\n' || c == '\r':
			return nil, errors.New("rule spans lines")
		default:
			cur.WriteByte(c)
			inArg = true
		}
	}
	if inQuote {
		return nil, errors.New("unterminated quote")
	}
	if inArg {
		args = append(args, cur.String())
	}
	return args, nil
}

// joinRule is the inverse of splitRule, quoting only what needs it.
func joinRule(args []string) string {
	var b strings.Builder
	for i, a := range args {
		if i > 0 {
			b.WriteByte(' ')
		}
		if a != "" && !strings.ContainsAny(a, " \t\"'\\#") {
			b.WriteString(a)
			continue
		}
		b.WriteByte('"')
		for j := 0; j < len(a); j++ {
			if a[j] == '"' || a[j] == '\\' {
				b.WriteByte('\\')
			}
			b.WriteByte(a[j])
		}
		b.WriteByte('"')
	}
	return b.String()
}

// normalize is the form rules are compared and written in: the same arguments, single-spaced
// and minimally quoted. It forgives only what cannot change a rule's meaning (blanks, quoting);
// everything else must already be in iptables-save's canonical form (see Table).
func normalize(rule string) (string, error) {
	args, err := splitRule(rule)
	if err != nil {
		return "", fmt.Errorf("rule %q: %w", rule, err)
	}
	if len(args) == 0 {
		return "", fmt.Errorf("rule %q: empty", rule)
	}
	return joinRule(args), nil
}

// target returns the chain a rule jumps or goes to, or "".
func target(rule string) string {
	args, err := splitRule(rule)
	if err != nil {
		return ""
	}
	for i := 0; i+1 < len(args); i++ {
		switch args[i] {
		case "-j", "--jump", "-g", "--goto":
			return args[i+1]
		}
	}
	return ""
}
