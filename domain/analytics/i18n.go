package analytics

import (
	"encoding/json"
	"slices"
	"strings"

	"github.com/marketscreener/market/jsonenc"
)

// Message is a text to render in the reader's language: a catalogue key
// and named arguments. Arguments are pre-formatted and language-neutral
// (numbers, prices, symbols), except that a value starting with "@" names
// another catalogue key and is rendered in the same language (a verdict
// word inside the summary).
type Message struct {
	Key  string `json:"key"`
	Args Args   `json:"args,omitempty"`
}

// Args are a message's named arguments, each name once, in name order (as
// msg and ArgsOf make them; others are written in that order all the
// same: InOrder). A report holds dozens of messages of one to five
// arguments, and a close scores thousands of reports: a slice is one
// allocation where a map was several, and is written without sorting. In
// JSON it is an object, byte for byte what encoding/json writes for the
// map.
type Args []Arg

// Arg is one named argument.
type Arg struct{ Name, Value string }

// Get is the argument named name.
func (a Args) Get(name string) (string, bool) {
	v, ok := "", false
	for _, x := range a {
		if x.Name == name {
			v, ok = x.Value, true // the last, as a map keeps
		}
	}
	return v, ok
}

// Value is the argument named name, "" when there is none.
func (a Args) Value(name string) string {
	v, _ := a.Get(name)
	return v
}

// ArgsOf makes Args from a map.
func ArgsOf(m map[string]string) Args {
	if m == nil {
		return nil
	}
	out := make(Args, 0, len(m))
	for k, v := range m {
		out = append(out, Arg{k, v})
	}
	return out.sort()
}

// InOrder is a in name order, each name once (its last value, as a map
// keeps): a itself when it is so already, as msg and ArgsOf make it.
func (a Args) InOrder() Args {
	for i := 1; i < len(a); i++ {
		if a[i-1].Name >= a[i].Name {
			return slices.Clone(a).sort()
		}
	}
	return a
}

// sort puts a in name order in place (stable: an insertion sort, for a
// handful of arguments) and keeps the last of each name.
func (a Args) sort() Args {
	for i := 1; i < len(a); i++ {
		for j := i; j > 0 && a[j].Name < a[j-1].Name; j-- {
			a[j], a[j-1] = a[j-1], a[j]
		}
	}
	k := 0
	for i := range a {
		if i+1 < len(a) && a[i+1].Name == a[i].Name {
			continue
		}
		a[k] = a[i]
		k++
	}
	return a[:k]
}

// MarshalJSON writes the arguments as an object, in name order, as
// encoding/json writes a map.
func (a Args) MarshalJSON() ([]byte, error) {
	if a == nil {
		return []byte("null"), nil
	}
	b := append(make([]byte, 0, 64), '{')
	for i, x := range a.InOrder() {
		if i > 0 {
			b = append(b, ',')
		}
		b = jsonenc.AppendString(b, x.Name)
		b = append(b, ':')
		b = jsonenc.AppendString(b, x.Value)
	}
	return append(b, '}'), nil
}

// UnmarshalJSON reads an object of strings (null: none).
func (a *Args) UnmarshalJSON(b []byte) error {
	var m map[string]string
	if err := json.Unmarshal(b, &m); err != nil {
		return err
	}
	*a = ArgsOf(m)
	return nil
}

// msg builds a Message from key/value pairs.
func msg(key string, kv ...string) Message {
	m := Message{Key: key}
	if len(kv) > 0 {
		m.Args = make(Args, 0, len(kv)/2)
		for i := 0; i+1 < len(kv); i += 2 {
			m.Args = append(m.Args, Arg{kv[i], kv[i+1]})
		}
		m.Args = m.Args.sort()
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
		v, ok := m.Args.Get(name)
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
