package analytics

// Lang is a report language.
type Lang string

// DefaultLang is used when the client names none.
const DefaultLang Lang = "ru"

// Langs lists the supported languages; index i is the column of the
// message catalogue.
var Langs = []Lang{"ru", "en", "es", "ja", "pt", "zh"}

// ParseLang parses a language code as written on the wire; the empty
// string means DefaultLang.
func ParseLang(s string) (Lang, bool) {
	if s == "" {
		return DefaultLang, true
	}
	for _, l := range Langs {
		if string(l) == s {
			return l, true
		}
	}
	return "", false
}
