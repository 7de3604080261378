package api

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/danielgtaylor/huma/v2"

	"github.com/marketscreener/market/domain"
	"github.com/marketscreener/market/screen"
)

// AlertData is what the alert operations read and write. Every call is
// scoped by the calling client's id: another client's alert is not found.
type AlertData interface {
	CreateAlert(ctx context.Context, a domain.Alert, tier domain.Tier) (domain.Alert, error)
	Alerts(ctx context.Context, clientID string) ([]domain.Alert, error)
	Alert(ctx context.Context, clientID, id string) (domain.Alert, error)
	DeleteAlert(ctx context.Context, clientID, id string) error
}

// AlertDefinition is an alert as listed.
type AlertDefinition struct {
	ID              string        `json:"id" format:"uuid" doc:"Identifier, used in the /alerts/{id} paths and in every alert.triggered event" example:"0b7e5a59-61c4-4a4c-9f0c-2f3c3a0d9e11"`
	Name            string        `json:"name" example:"oversold growth"`
	Market          domain.Market `json:"market" example:"crypto"`
	Where           string        `json:"where" doc:"The condition, as written" example:"swing.verdict == \"growth\" && factors.rsi_14.value < 30"`
	Symbols         []string      `json:"symbols" nullable:"true" doc:"The assets watched (canonical form); null means every asset of the market" example:"[\"BTC_USDT\",\"ETH_USDT\"]"`
	CooldownSeconds int           `json:"cooldown_seconds" doc:"Least time between two firings on one asset" example:"3600"`
	Variables       []string      `json:"variables" doc:"The variables the condition reads: their values are in every event's values" example:"[\"factors.rsi_14.value\",\"swing.verdict\"]"`
	CreatedAt       time.Time     `json:"created_at" example:"2026-11-22T10:15:00Z"`
}

type createAlertInput struct {
	Body struct {
		Name            string        `json:"name" minLength:"1" maxLength:"100" doc:"Your name for the alert (1 to 100 characters); it is in every event" example:"oversold growth"`
		Market          domain.Market `json:"market" doc:"The market whose assets the alert watches" example:"crypto"`
		Where           string        `json:"where" minLength:"1" maxLength:"2048" doc:"The condition, in the expression language of POST /screener/query (CEL): it must yield a boolean" example:"swing.verdict == \"growth\" && factors.rsi_14.value < 30"`
		Symbols         []string      `json:"symbols,omitempty" maxItems:"50" doc:"Only these assets (at most 50, any symbol form); omitted means every asset of the market" example:"[\"BTC_USDT\",\"ETH/USDT\"]"`
		CooldownSeconds int           `json:"cooldown_seconds,omitempty" minimum:"0" maximum:"604800" default:"0" doc:"Least time between two firings on one asset, 0 to 604800 (7 days); default 0" example:"3600"`
	}
}

type alertOutput struct {
	CacheControl string `header:"Cache-Control"`
	Body         AlertDefinition
}

type listAlertsOutput struct {
	CacheControl string `header:"Cache-Control"`
	Body         []AlertDefinition
}

type alertIDInput struct {
	ID string `path:"id" format:"uuid" doc:"Alert id" example:"0b7e5a59-61c4-4a4c-9f0c-2f3c3a0d9e11"`
}

func alertDefinition(a domain.Alert) AlertDefinition {
	out := AlertDefinition{ID: a.ID, Name: a.Name, Market: a.Market, Where: a.Expression, Symbols: a.Symbols,
		CooldownSeconds: a.CooldownSeconds, Variables: []string{}, CreatedAt: a.CreatedAt}
	if p, err := screen.Compile(string(a.Market), a.Expression); err == nil {
		out.Variables = p.Variables()
	}
	return out
}

const alertsDescription = "An alert fires when its condition turns from false to true on one asset, at most once per cooldown. " +
	"It is evaluated after every rescoring of an asset (a closed candle, new fundamentals), on the asset's reports after it: " +
	"a verdict_changed event and an alert on `verdict` come from the same rescoring and carry the same timestamp. " +
	"An alert is first evaluated on an asset at its next rescoring, against the value before it: an alert created while its " +
	"condition already holds fires only once the condition has been false. " +
	"Each firing is an `alert.triggered` event `{id, event, alert_id, alert_name, market, symbol, timestamp, values}` (values: every " +
	"variable the condition read) POSTed to every active webhook subscription of yours for the market, signed and retried like " +
	"verdict_changed (one queue per subscription, in event order), and an `alert` event on your GET /stream. " +
	"The variables are those of POST /screener/query: " + "`overall_score`, `verdict`, `technical_score`, `fundamental_score`, " +
	"`factors.<name>.value` and `.sentiment`, `price`, `change_pct`, `volume`, and for crypto each style under its name " +
	"(`scalp.`, `intraday.`, `swing.`, `position.`; unprefixed means swing). Examples: `verdict == \"growth\" && factors.rsi_14.value < 30`; " +
	"`swing.verdict == \"growth\" && scalp.overall_score > 40`; `overall_score <= -50 && volume > 1e6`."

func (s *Server) registerAlerts() {
	tags := []string{tagAlerts}
	register(s, huma.Operation{
		OperationID: "create-alert", DefaultStatus: http.StatusCreated,
		Summary: "Create an alert",
		Description: alertsDescription + " The condition is compiled at once: a syntax or type error, or one too long (2048 characters), " +
			"too deeply nested (32 levels) or too costly (an estimated cost over 1000 operations), is a 400 naming `body.where` with the " +
			"line, column and message. " + fmt.Sprintf("At most %d alerts per client on starter, %d on business, %d on enterprise (409 beyond).",
			domain.Starter.MaxAlerts(), domain.Business.MaxAlerts(), domain.Enterprise.MaxAlerts()),
		Tags: tags, Errors: errorResponses(http.StatusConflict),
	}, s.createAlert)
	register(s, huma.Operation{
		OperationID: "list-alerts",
		Summary:     "Your alerts",
		Description: "Every alert of your organisation, oldest first.",
		Tags:        tags, Errors: errorResponses(),
	}, s.listAlerts)
	register(s, huma.Operation{
		OperationID: "get-alert",
		Summary:     "One alert",
		Description: "The alert. 404 for an unknown id (or another organisation's).",
		Tags:        tags, Errors: errorResponses(http.StatusNotFound),
	}, s.getAlert)
	register(s, huma.Operation{
		OperationID: "delete-alert", DefaultStatus: http.StatusNoContent,
		Summary:     "Delete an alert",
		Description: "Deletes the alert: it fires no more. Events it fired before are still delivered. 404 for an unknown id.",
		Tags:        tags, Errors: errorResponses(http.StatusNotFound),
	}, s.deleteAlert)
}

func (s *Server) createAlert(ctx context.Context, in *createAlertInput) (*alertOutput, error) {
	p := principalFrom(ctx)
	b := in.Body
	if err := domain.ValidateAlertDefinition(b.Name, b.Where, b.CooldownSeconds); err != nil {
		return nil, s.problem(ctx, err)
	}
	if err := requireMarket(ctx, b.Market); err != nil {
		return nil, err
	}
	symbols, err := domain.NormalizeAlertSymbols(b.Market, b.Symbols)
	if err != nil {
		return nil, s.problem(ctx, err)
	}
	if _, err := screen.Compile(string(b.Market), b.Where); err != nil {
		return nil, s.problem(ctx, whereError(b.Where, err))
	}
	a, err := s.alerts.CreateAlert(ctx, domain.Alert{ClientID: p.Client.ID, Name: strings.TrimSpace(b.Name), Market: b.Market,
		Expression: b.Where, Symbols: symbols, CooldownSeconds: b.CooldownSeconds}, p.Client.Tier)
	if err != nil {
		return nil, s.problem(ctx, err)
	}
	return &alertOutput{CacheControl: noStore, Body: alertDefinition(a)}, nil
}

// whereError is the 400 of a condition that does not compile: the
// library's message with its position.
func whereError(expr string, err error) error {
	e, ok := screen.IsExprError(err)
	if !ok {
		return domain.Invalid("body.where", expr, "%s", err.Error())
	}
	if e.Line == 0 {
		return domain.Invalid("body.where", expr, "%s: %s", e.Kind, e.Message)
	}
	return domain.Invalid("body.where", expr, "%s error at line %d, column %d (offset %d): %s", e.Kind, e.Line, e.Column, e.Offset, e.Message)
}

func (s *Server) listAlerts(ctx context.Context, _ *struct{}) (*listAlertsOutput, error) {
	as, err := s.alerts.Alerts(ctx, principalFrom(ctx).Client.ID)
	if err != nil {
		return nil, s.problem(ctx, err)
	}
	out := make([]AlertDefinition, len(as))
	for i, a := range as {
		out[i] = alertDefinition(a)
	}
	return &listAlertsOutput{CacheControl: noStore, Body: out}, nil
}

func (s *Server) getAlert(ctx context.Context, in *alertIDInput) (*alertOutput, error) {
	a, err := s.alerts.Alert(ctx, principalFrom(ctx).Client.ID, in.ID)
	if err != nil {
		return nil, s.problem(ctx, err)
	}
	return &alertOutput{CacheControl: noStore, Body: alertDefinition(a)}, nil
}

func (s *Server) deleteAlert(ctx context.Context, in *alertIDInput) (*struct{}, error) {
	if err := s.alerts.DeleteAlert(ctx, principalFrom(ctx).Client.ID, in.ID); err != nil {
		return nil, s.problem(ctx, err)
	}
	return nil, nil
}
