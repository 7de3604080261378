package analytics

import "strings"

// Message is a text to render in the reader's language: a catalogue key
// and named arguments. Arguments are pre-formatted and language-neutral
// (numbers, prices, symbols), except that a value starting with "@" names
// another catalogue key and is rendered in the same language (a verdict
// word inside the summary).
type Message struct {
	Key  string            `json:"key"`
	Args map[string]string `json:"args,omitempty"`
}

// msg builds a Message from key/value pairs.
func msg(key string, kv ...string) Message {
	m := Message{Key: key}
	if len(kv) > 0 {
		m.Args = make(map[string]string, len(kv)/2)
		for i := 0; i+1 < len(kv); i += 2 {
			m.Args[kv[i]] = kv[i+1]
		}
	}
	return m
}

// ref is an argument value that renders catalogue key k.
func ref(k string) string { return "@" + k }

// Render renders m in lang: placeholders {name} are replaced by their
// arguments. An unknown language falls back to DefaultLang and an unknown
// key renders as the key itself, so a stored result never breaks a
// response.
func Render(lang Lang, m Message) string {
	tmpl, ok := lookup(lang, m.Key)
	if !ok {
		return m.Key
	}
	if strings.IndexByte(tmpl, '{') < 0 {
		return tmpl
	}
	var b strings.Builder
	b.Grow(len(tmpl) + 32)
	for {
		open := strings.IndexByte(tmpl, '{')
		if open < 0 {
			break
		}
		end := strings.IndexByte(tmpl[open:], '}')
		if end < 0 {
			break
		}
		b.WriteString(tmpl[:open])
		name := tmpl[open+1 : open+end]
		v, ok := m.Args[name]
		switch {
		case !ok:
			b.WriteString(tmpl[open : open+end+1]) // left visible; tests forbid it
		case strings.HasPrefix(v, "@"):
			if t, ok := lookup(lang, v[1:]); ok {
				b.WriteString(t)
			} else {
				b.WriteString(v[1:])
			}
		default:
			b.WriteString(v)
		}
		tmpl = tmpl[open+end+1:]
	}
	b.WriteString(tmpl)
	return b.String()
}

// lookup returns the template of key in lang.
func lookup(lang Lang, key string) (string, bool) {
	t, ok := catalogue[key]
	if !ok {
		return "", false
	}
	return t.in(lang), true
}

// texts is one catalogue entry in every language.
type texts struct{ ru, en, es, ja, pt, zh string }

// in returns the text in lang, DefaultLang's for an unknown language.
func (t *texts) in(lang Lang) string {
	switch lang {
	case "en":
		return t.en
	case "es":
		return t.es
	case "ja":
		return t.ja
	case "pt":
		return t.pt
	case "zh":
		return t.zh
	}
	return t.ru
}
