package analytics

import "math"

// Report is a Result rendered in one language: the analytics part of the
// api's response, with the wire names of the public contract.
type Report struct {
	TechnicalScore   int            `json:"technical_score"`
	FundamentalScore *int           `json:"fundamental_score"` // null when unavailable
	OverallScore     int            `json:"overall_score"`
	Verdict          Verdict        `json:"verdict"`
	Summary          string         `json:"summary"`
	Factors          []ReportFactor `json:"factors"`
	Scenario         ReportScenario `json:"scenario"`
	ModelVersion     string         `json:"model_version"`
}

// ReportFactor is a factor with its explanation rendered.
type ReportFactor struct {
	Name        string    `json:"name"`
	Value       string    `json:"value"`
	Sentiment   Sentiment `json:"sentiment"`
	Weight      float64   `json:"weight"` // 0..1, rounded to 4 decimals
	Group       string    `json:"group"`
	Explanation string    `json:"explanation"`
}

// ReportScenario is the scenario with its texts rendered.
type ReportScenario struct {
	Support          float64 `json:"support"`
	Resistance       float64 `json:"resistance"`
	LastClose        float64 `json:"last_close"`
	ScenarioText     string  `json:"scenario_text"`
	InvalidationText string  `json:"invalidation_text"`
}

// Localize renders the result in lang (DefaultLang for an unknown one).
func (r Result) Localize(lang Lang) Report {
	rep := Report{
		TechnicalScore:   r.TechnicalScore,
		FundamentalScore: r.FundamentalScore,
		OverallScore:     r.OverallScore,
		Verdict:          r.Verdict,
		ModelVersion:     r.ModelVersion,
		Summary:          Render(lang, r.Summary),
		Factors:          make([]ReportFactor, len(r.Factors)),
		Scenario: ReportScenario{
			Support:          r.Scenario.Support,
			Resistance:       r.Scenario.Resistance,
			LastClose:        r.Scenario.LastClose,
			ScenarioText:     Render(lang, r.Scenario.Text),
			InvalidationText: Render(lang, r.Scenario.Invalidation),
		},
	}
	for i, f := range r.Factors {
		rep.Factors[i] = ReportFactor{Name: f.Name, Value: f.Value, Sentiment: f.Sentiment,
			Weight: math.Round(f.Weight*1e4) / 1e4, Group: f.Group, Explanation: Render(lang, f.Text)}
	}
	return rep
}
