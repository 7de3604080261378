package push

import (
	"encoding/json"
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/marketscreener/market/domain"
)

// Alpaca's documented messages ([docs-md] realtime.md): the examples of
// the minute and daily bar schemas, a trade (whose "s" and "c" a bar
// decoder must not take for "S" and "c"), and the control messages.
const (
	alpacaDocMinuteBar = `{"T":"b","S":"SPY","o":388.985,"h":389.13,"l":388.975,"c":389.12,"v":49378,"t":"2021-02-22T19:15:00Z"}`
	alpacaDocDailyBar  = `{"T":"d","S":"SPY","o":388.985,"h":389.13,"l":388.975,"c":389.12,"v":749378,"t":"2021-02-16T04:00:00Z"}`
	alpacaDocTrade     = `{"T":"t","i":96921,"S":"AAPL","x":"D","p":126.55,"s":1,"t":"2021-02-22T15:51:44.208Z","c":["@","I"],"z":"C"}`
	alpacaDocSubscribe = `[{"T":"subscription","trades":["AAPL"],"quotes":["AMD","CLDR"],"bars":["IBM","AAPL","VOO"]}]`
)

func decodeAlpacaAll(t *testing.T, frame string) []alpacaMsg {
	t.Helper()
	var got []alpacaMsg
	if err := decodeAlpaca([]byte(frame), func(m alpacaMsg) { got = append(got, m) }); err != nil {
		t.Fatalf("decode: %v", err)
	}
	return got
}

// TestAlpacaDecodesDocBars: a minute bar is the closed 1m candle of its
// minute, a daily bar (stamped at New York's midnight, 04:00Z in summer
// time) the open 1d candle of its date at UTC midnight; an updated bar is
// a minute bar again; trades in the same frame are skipped, and their
// lower-case "s" and "c" do not leak into the bars.
func TestAlpacaDecodesDocBars(t *testing.T) {
	t.Parallel()
	updated := strings.Replace(alpacaDocMinuteBar, `"T":"b"`, `"T":"u"`, 1)
	got := decodeAlpacaAll(t, "["+alpacaDocTrade+","+alpacaDocMinuteBar+","+alpacaDocDailyBar+","+updated+"]")
	spy := domain.Candle{Time: time.Date(2021, 2, 22, 19, 15, 0, 0, time.UTC), Open: 388.985, High: 389.13, Low: 388.975, Close: 389.12, Volume: 49378}
	day := domain.Candle{Time: time.Date(2021, 2, 16, 0, 0, 0, 0, time.UTC), Open: 388.985, High: 389.13, Low: 388.975, Close: 389.12, Volume: 749378}
	want := []alpacaMsg{
		{typ: "b", symbol: "SPY", tf: domain.TF1m, closed: true, candle: spy},
		{typ: "d", symbol: "SPY", tf: domain.TF1d, closed: false, candle: day},
		{typ: "u", symbol: "SPY", tf: domain.TF1m, closed: true, candle: spy},
	}
	if diff := cmp.Diff(want, got, cmp.AllowUnexported(alpacaMsg{}), floatEq); diff != "" {
		t.Fatalf("messages (-want +got):\n%s", diff)
	}
	for _, m := range got {
		if err := m.candle.Validate(); err != nil {
			t.Errorf("%s: %v", m.typ, err)
		}
	}
}

// TestAlpacaDecodesControlMessages: success, error and the subscription
// confirmation (every current list, [docs-md]).
func TestAlpacaDecodesControlMessages(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		frame string
		want  alpacaMsg
	}{
		{`[{"T":"success","msg":"connected"}]`, alpacaMsg{typ: "success", msg: "connected"}},
		{`[{"T":"success","msg":"authenticated"}]`, alpacaMsg{typ: "success", msg: "authenticated"}},
		{`[{"T":"error","code":406,"msg":"connection limit exceeded"}]`, alpacaMsg{typ: "error", code: 406, msg: "connection limit exceeded"}},
		{alpacaDocSubscribe, alpacaMsg{typ: "subscription", subscribed: map[string][]string{"bars": {"IBM", "AAPL", "VOO"}, "updatedBars": nil, "dailyBars": nil}}},
	} {
		got := decodeAlpacaAll(t, tc.frame)
		if diff := cmp.Diff([]alpacaMsg{tc.want}, got, cmp.AllowUnexported(alpacaMsg{})); diff != "" {
			t.Errorf("%s (-want +got):\n%s", tc.frame, diff)
		}
	}
}

// TestAlpacaDecodeReportsBadBars: a bar without a field, with a bad time
// or without a symbol is left out and reported; the rest of its frame is
// still delivered; a frame that is not an array is an error.
func TestAlpacaDecodeReportsBadBars(t *testing.T) {
	t.Parallel()
	bad := []string{
		strings.Replace(alpacaDocMinuteBar, `"v":49378,`, ``, 1),
		strings.Replace(alpacaDocMinuteBar, `2021-02-22T19:15:00Z`, `yesterday`, 1),
		strings.Replace(alpacaDocMinuteBar, `"S":"SPY",`, ``, 1),
		strings.Replace(alpacaDocMinuteBar, `388.985`, `"388.985"`, 1),
	}
	for _, b := range bad {
		var got []alpacaMsg
		err := decodeAlpaca([]byte("["+b+","+alpacaDocDailyBar+"]"), func(m alpacaMsg) { got = append(got, m) })
		if err == nil || len(got) != 1 || got[0].typ != "d" {
			t.Errorf("%s: err %v, delivered %+v; want an error and the daily bar alone", b, err, got)
		}
	}
	if err := decodeAlpaca([]byte(`{"T":"success"}`), func(alpacaMsg) {}); err == nil {
		t.Error("an object frame decoded without error")
	}
}

// TestAlpacaSubscribeAndAuthMessages: the auth message carries the keys;
// subscribe messages name bars and updatedBars of the minute series and
// dailyBars of the daily ones, at most alpacaSubscribeSymbols a message.
func TestAlpacaSubscribeAndAuthMessages(t *testing.T) {
	t.Parallel()
	var auth map[string]string
	if err := json.Unmarshal(alpacaAuth(AlpacaConfig{KeyID: "id", Secret: "s3"}), &auth); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(map[string]string{"action": "auth", "key": "id", "secret": "s3"}, auth); diff != "" {
		t.Errorf("auth message (-want +got):\n%s", diff)
	}
	syms := make([]string, 2500)
	for i := range syms {
		syms[i] = "S" + strings.Repeat("X", i%4) + string(rune('A'+i%26))
	}
	msgs := alpacaSubscribe(syms, syms[:10])
	if len(msgs) != 3 {
		t.Fatalf("%d subscribe messages for 2,500 symbols, want 3", len(msgs))
	}
	var total, daily int
	for _, m := range msgs {
		var sub struct {
			Action                       string
			Bars, UpdatedBars, DailyBars []string
		}
		if err := json.Unmarshal(m, &sub); err != nil {
			t.Fatal(err)
		}
		if sub.Action != "subscribe" || len(sub.Bars) > alpacaSubscribeSymbols || !slices.Equal(sub.Bars, sub.UpdatedBars) || sub.DailyBars == nil {
			t.Errorf("subscribe message %.200s", m)
		}
		total, daily = total+len(sub.Bars), daily+len(sub.DailyBars)
	}
	if total != len(syms) || daily != 10 {
		t.Errorf("%d bars and %d daily bars subscribed, want %d and 10", total, daily, len(syms))
	}
}

// TestAlpacaErrorOutcomes: what each documented error code does to the
// connection ([docs-md] "Errors"; 410 and 411 from [sdk-go] errors.go).
func TestAlpacaErrorOutcomes(t *testing.T) {
	t.Parallel()
	for code, want := range map[int]alpacaOutcome{
		400: alpacaBug, 401: alpacaRefused, 402: alpacaRefused, 403: alpacaBug, 404: alpacaRefused,
		405: alpacaStopped, 406: alpacaBusy, 407: alpacaDropped, 408: alpacaRefused, 409: alpacaStopped,
		410: alpacaBug, 411: alpacaStopped, 500: alpacaDropped,
	} {
		if got := alpacaOutcomeOf(code); got != want {
			t.Errorf("code %d: outcome %d, want %d", code, got, want)
		}
	}
	if (AlpacaConfig{}).SymbolLimit() != 30 || (AlpacaConfig{Feed: "iex"}).SymbolLimit() != 30 || (AlpacaConfig{Feed: "sip"}).SymbolLimit() != 0 {
		t.Error("symbol limits: want 30 on iex (the default), none on sip")
	}
}

// FuzzDecodeAlpaca: nothing panics, and every candle delivered is
// finite.
func FuzzDecodeAlpaca(f *testing.F) {
	for _, seed := range []string{"[" + alpacaDocMinuteBar + "]", "[" + alpacaDocDailyBar + "," + alpacaDocTrade + "]", alpacaDocSubscribe,
		`[{"T":"error","code":402,"msg":"auth failed"}]`, `[{"T":"b","S":"X","o":1e400}]`, `[{"t":"b"}]`} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		_ = decodeAlpaca(data, func(m alpacaMsg) {
			c := m.candle
			for _, v := range []float64{c.Open, c.High, c.Low, c.Close, c.Volume} {
				if math.IsNaN(v) || math.IsInf(v, 0) {
					t.Fatalf("non-finite candle value from %q", data)
				}
			}
		})
	})
}
