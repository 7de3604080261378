package api

import (
	"reflect"

	"github.com/danielgtaylor/huma/v2"

	"github.com/marketscreener/market/domain"
	"github.com/marketscreener/market/domain/analytics"
	"github.com/marketscreener/market/domain/stats"
)

// Every enum of the OpenAPI document, and so every enum huma validates,
// is generated from domain's lists: a field of a domain type (a market, a
// timeframe, a style, a language, a verdict...) takes its type's list
// (registerDomainEnums), and a field whose domain values are plain
// strings or numbers takes one of the named types below. No struct tag
// repeats a list; enums_test.go compares the document with domain.

// registerDomainEnums gives each domain type the schema of its list.
func registerDomainEnums(r huma.Registry) {
	alias := func(domainType, schemaType any) {
		r.RegisterTypeAlias(reflect.TypeOf(domainType), reflect.TypeOf(schemaType))
	}
	alias(domain.Market(""), marketEnum(""))
	alias(domain.Timeframe(""), timeframeEnum(""))
	alias(domain.Tier(""), tierEnum(""))
	alias(domain.ClientStatus(""), clientStatusEnum(""))
	alias(analytics.Style(""), styleEnum(""))
	alias(analytics.Lang(""), langEnum(""))
	alias(analytics.Verdict(""), verdictEnum(""))
	alias(analytics.Sentiment(""), sentimentEnum(""))
}

// The schemas of the domain types (registerDomainEnums).
type (
	marketEnum       string
	timeframeEnum    string
	tierEnum         string
	clientStatusEnum string
	styleEnum        string
	langEnum         string
	verdictEnum      string
	sentimentEnum    string
)

func (marketEnum) Schema(huma.Registry) *huma.Schema       { return stringEnum(domain.Markets) }
func (timeframeEnum) Schema(huma.Registry) *huma.Schema    { return stringEnum(domain.Timeframes) }
func (tierEnum) Schema(huma.Registry) *huma.Schema         { return stringEnum(domain.Tiers) }
func (clientStatusEnum) Schema(huma.Registry) *huma.Schema { return stringEnum(domain.ClientStatuses) }
func (styleEnum) Schema(huma.Registry) *huma.Schema        { return stringEnum(analytics.Styles) }
func (langEnum) Schema(huma.Registry) *huma.Schema         { return stringEnum(analytics.Langs) }
func (verdictEnum) Schema(huma.Registry) *huma.Schema      { return stringEnum(analytics.Verdicts) }
func (sentimentEnum) Schema(huma.Registry) *huma.Schema    { return stringEnum(analytics.Sentiments) }

// Fields whose domain values are plain strings or numbers.
type (
	// directionalVerdict is a verdict that points somewhere (the top setups' filter).
	directionalVerdict string
	factorGroup        string
	statsSource        string
	verdictHorizon     int
	factorHorizon      int
	webhookStatus      string
	deliveryState      string
	dropReason         string
	deliveryErrorCat   string
	pingErrorCat       string
	verdictChangedName string
	screenerEventName  string
	deliveryEventName  string
)

func (directionalVerdict) Schema(huma.Registry) *huma.Schema {
	return stringEnum(analytics.DirectionalVerdicts)
}
func (factorGroup) Schema(huma.Registry) *huma.Schema    { return stringEnum(analytics.Groups) }
func (statsSource) Schema(huma.Registry) *huma.Schema    { return stringEnum(stats.Sources) }
func (verdictHorizon) Schema(huma.Registry) *huma.Schema { return intEnum(stats.VerdictHorizons) }
func (factorHorizon) Schema(huma.Registry) *huma.Schema  { return intEnum(stats.FactorHorizons) }
func (webhookStatus) Schema(huma.Registry) *huma.Schema  { return stringEnum(domain.WebhookStatuses) }
func (deliveryState) Schema(huma.Registry) *huma.Schema  { return stringEnum(domain.DeliveryStates) }
func (dropReason) Schema(huma.Registry) *huma.Schema     { return stringEnum(domain.DropReasons) }
func (deliveryErrorCat) Schema(huma.Registry) *huma.Schema {
	return stringEnum(domain.DeliveryErrorCategories)
}
func (pingErrorCat) Schema(huma.Registry) *huma.Schema { return stringEnum(domain.PingErrorCategories) }
func (verdictChangedName) Schema(huma.Registry) *huma.Schema {
	return stringEnum([]string{domain.EventVerdictChanged})
}
func (screenerEventName) Schema(huma.Registry) *huma.Schema {
	return stringEnum([]string{domain.EventScreener})
}
func (deliveryEventName) Schema(huma.Registry) *huma.Schema {
	return stringEnum(domain.WebhookEventKinds)
}

// stringEnum is the schema of a string allowed only vals. The values are
// plain strings: huma's validation compares them with the decoded value.
func stringEnum[T ~string](vals []T) *huma.Schema {
	enum := make([]any, len(vals))
	for i, v := range vals {
		enum[i] = string(v)
	}
	return &huma.Schema{Type: huma.TypeString, Enum: enum}
}

// intEnum is the schema of an integer allowed only vals (numbers decode
// as float64, as huma's own enum tags do).
func intEnum(vals []int) *huma.Schema {
	enum := make([]any, len(vals))
	for i, v := range vals {
		enum[i] = float64(v)
	}
	return &huma.Schema{Type: huma.TypeInteger, Format: "int64", Enum: enum}
}
