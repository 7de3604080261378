package stats

import (
	"encoding/json"
	"fmt"
)

// The accumulators are sufficient statistics: the statistics job keeps
// them in Postgres, one pair per market, source and day (the observations
// of the bars of that day), and merges the stored days into the records,
// so that a new day adds only its own observations. MarshalJSON and
// UnmarshalJSON carry every field exactly: Go writes a float64 in the
// shortest form that reads back to the same bits.

type dayState struct {
	First int    `json:"first,omitempty"`
	Seen  []bool `json:"seen,omitempty"`
}

func (s daySet) state() dayState { return dayState{First: s.first, Seen: s.v} }

func (s *daySet) restore(d dayState) { s.first, s.v = d.First, d.Seen }

type talliesState struct {
	First int      `json:"first,omitempty"`
	NK    [][2]int `json:"nk,omitempty"`
}

func (t tallies) state() talliesState {
	out := talliesState{First: t.first, NK: make([][2]int, len(t.v))}
	for i, c := range t.v {
		out.NK[i] = [2]int{c.n, c.k}
	}
	return out
}

func (t *tallies) restore(s talliesState) {
	t.first, t.v = s.First, make([]dayTally, len(s.NK))
	for i, nk := range s.NK {
		t.v[i] = dayTally{n: nk[0], k: nk[1]}
	}
}

type verdictCellState struct {
	H    int          `json:"h"`
	Wins talliesState `json:"wins"`
	N    int          `json:"n"`
	Mean float64      `json:"mean"`
}

type baseCellState struct {
	H    int    `json:"h"`
	N    int    `json:"n"`
	Wins [3]int `json:"wins"`
}

type verdictState struct {
	Cells [3][]verdictCellState `json:"cells"`
	Bases []baseCellState       `json:"bases"`
	Days  dayState              `json:"days"`
}

// MarshalJSON encodes every observation the accumulator holds.
func (a *VerdictAccumulator) MarshalJSON() ([]byte, error) {
	var s verdictState
	for vi := range a.cells {
		for _, c := range a.cells[vi] {
			s.Cells[vi] = append(s.Cells[vi], verdictCellState{H: c.h, Wins: c.c.wins.state(), N: c.c.returns.n, Mean: c.c.returns.mean})
		}
	}
	for _, b := range a.bases {
		s.Bases = append(s.Bases, baseCellState{H: b.h, N: b.c.n, Wins: b.c.wins})
	}
	s.Days = a.days.state()
	return json.Marshal(s)
}

// UnmarshalJSON restores what MarshalJSON encoded, replacing a's content.
func (a *VerdictAccumulator) UnmarshalJSON(b []byte) error {
	var s verdictState
	if err := json.Unmarshal(b, &s); err != nil {
		return fmt.Errorf("stats: verdict observations: %w", err)
	}
	*a = VerdictAccumulator{}
	for vi := range s.Cells {
		for _, cs := range s.Cells[vi] {
			c := a.cells[vi].get(cs.H)
			c.wins.restore(cs.Wins)
			c.returns = runningMean{n: cs.N, mean: cs.Mean}
		}
	}
	for _, bs := range s.Bases {
		b := a.bases.get(bs.H)
		b.n, b.wins = bs.N, bs.Wins
	}
	a.days.restore(s.Days)
	return nil
}

type factorCellState struct {
	H       int          `json:"h"`
	Hits    talliesState `json:"hits"`
	Bullish int          `json:"bullish"`
	M       [6]float64   `json:"m"` // meanX, meanY, m2x, m2y, cxy and n
}

type moveCellState struct {
	H  int    `json:"h"`
	NS [3]int `json:"n"` // n, up, down
}

type factorState struct {
	Factors map[string][]factorCellState `json:"factors"`
	Moves   []moveCellState              `json:"moves"`
	Days    dayState                     `json:"days"`
}

// MarshalJSON encodes every observation the accumulator holds.
func (a *FactorAccumulator) MarshalJSON() ([]byte, error) {
	s := factorState{Factors: make(map[string][]factorCellState, len(a.factors))}
	for name, cells := range a.factors {
		out := make([]factorCellState, 0, len(*cells))
		for _, c := range *cells {
			m := c.c.m
			out = append(out, factorCellState{H: c.h, Hits: c.c.hits.state(), Bullish: c.c.bullish,
				M: [6]float64{m.meanX, m.meanY, m.m2x, m.m2y, m.cxy, float64(m.n)}})
		}
		s.Factors[name] = out
	}
	for _, m := range a.moves {
		s.Moves = append(s.Moves, moveCellState{H: m.h, NS: [3]int{m.c.n, m.c.up, m.c.down}})
	}
	s.Days = a.days.state()
	return json.Marshal(s)
}

// UnmarshalJSON restores what MarshalJSON encoded, replacing a's content.
func (a *FactorAccumulator) UnmarshalJSON(b []byte) error {
	var s factorState
	if err := json.Unmarshal(b, &s); err != nil {
		return fmt.Errorf("stats: factor observations: %w", err)
	}
	*a = FactorAccumulator{}
	for name, cells := range s.Factors {
		fc := a.factor(name)
		for _, cs := range cells {
			c := fc.get(cs.H)
			c.hits.restore(cs.Hits)
			c.bullish = cs.Bullish
			c.m = moments{meanX: cs.M[0], meanY: cs.M[1], m2x: cs.M[2], m2y: cs.M[3], cxy: cs.M[4], n: int(cs.M[5])}
		}
	}
	for _, ms := range s.Moves {
		m := a.moves.get(ms.H)
		m.n, m.up, m.down = ms.NS[0], ms.NS[1], ms.NS[2]
	}
	a.days.restore(s.Days)
	return nil
}

// Window returns the first and last day (see DayNumber) an observation
// was filed under; ok is false when there is none.
func (a *VerdictAccumulator) Window() (first, last int, ok bool) { return a.days.window() }

// Window returns the first and last day an observation was filed under;
// ok is false when there is none.
func (a *FactorAccumulator) Window() (first, last int, ok bool) { return a.days.window() }

func (s daySet) window() (first, last int, ok bool) {
	lo, hi := -1, -1
	for i, seen := range s.v {
		if seen {
			if lo < 0 {
				lo = i
			}
			hi = i
		}
	}
	if lo < 0 {
		return 0, 0, false
	}
	return s.first + lo, s.first + hi, true
}
