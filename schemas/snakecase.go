package schemas

import (
	"strings"
	"unicode"
)

// SnakeCase turns an audience name into the trait key that carries membership (docs/configuration.md#audience-names-and-trait-keys-snake_case):
// "Power Users" → "power_users". The rule, applied to the name's runes in order:
//
//  1. Apostrophes (' and ’) are deleted: "Mom's Picks" → "moms_picks".
//  2. Letters (Unicode L), marks (M) and numbers (N) make up words; every other rune (space,
//     punctuation, '_', '-', symbols, emoji, invalid UTF-8) separates words, and any run of
//     separators counts as one, so leading and trailing separators vanish.
//  3. Inside a run of word runes a new word starts
//     - between a number and a letter, either way: "Top10" → "top_10";
//     - before an upper-case letter that follows a lower-case letter: "powerUsers" → "power_users";
//     - before the last upper-case letter of an upper-case run when a lower-case letter follows
//     it: "HTTPServer" → "http_server".
//     Marks stay with the rune before them and never start a word; letters without case (CJK,
//     for instance) never start a word either. "Upper-case" means the letter has a different
//     lower-case form (unicode.ToLower).
//  4. Each word is lower-cased (strings.ToLower; non-ASCII letters are kept, not transliterated:
//     "Café Lovers" → "café_lovers") and the words are joined with '_'.
//
// The result is "" when the name has no letters or numbers. No Unicode normalisation is
// applied, so a name written with a combining accent differs from one with a precomposed
// letter. SnakeCase is idempotent: SnakeCase(SnakeCase(s)) == SnakeCase(s).
func SnakeCase(name string) string {
	runes := []rune(name)
	var (
		b    strings.Builder
		word []rune
		prev runeClass // class of the last non-mark rune of word
	)
	flush := func() {
		if len(word) == 0 {
			return
		}
		if b.Len() > 0 {
			b.WriteByte('_')
		}
		b.WriteString(strings.ToLower(string(word)))
		word = word[:0]
		prev = classSeparator
	}
	for i, r := range runes {
		if r == '\'' || r == '\u2019' {
			continue
		}
		c := classify(r)
		if c == classSeparator {
			flush()
			continue
		}
		if len(word) > 0 && c != classMark && prev != classSeparator {
			switch {
			case (c == classNumber) != (prev == classNumber):
				flush()
			case c == classUpper && prev == classLower:
				flush()
			case c == classUpper && prev == classUpper && nextIsLower(runes[i+1:]):
				flush()
			}
		}
		word = append(word, r)
		if c != classMark {
			prev = c
		}
	}
	flush()
	return b.String()
}

type runeClass int

const (
	classSeparator runeClass = iota
	classMark
	classNumber
	classUpper
	classLower
	classCaseless
)

func classify(r rune) runeClass {
	switch {
	case unicode.IsMark(r):
		return classMark
	case unicode.IsNumber(r):
		return classNumber
	case unicode.IsLetter(r):
		switch {
		case unicode.ToLower(r) != r:
			return classUpper
		case unicode.IsLower(r):
			return classLower
		default:
			return classCaseless
		}
	default:
		return classSeparator
	}
}

// nextIsLower reports whether the next rune that is not a mark or an apostrophe is a
// lower-case letter.
func nextIsLower(rest []rune) bool {
	for _, r := range rest {
		if r == '\'' || r == '\u2019' {
			continue
		}
		switch classify(r) {
		case classMark:
			continue
		case classLower:
			return true
		default:
			return false
		}
	}
	return false
}
