package api

import (
	"reflect"

	"github.com/danielgtaylor/huma/v2"
)

// OptionalParam is a query parameter that may be absent (huma's documented
// pattern for optional scalars): IsSet tells "not given" from zero.
type OptionalParam[T any] struct {
	Value T
	IsSet bool
}

// Schema describes the parameter as its underlying type.
func (o OptionalParam[T]) Schema(r huma.Registry) *huma.Schema {
	return huma.SchemaFromType(r, reflect.TypeOf(o.Value))
}

// Receiver lets huma parse straight into Value.
func (o *OptionalParam[T]) Receiver() reflect.Value { return reflect.ValueOf(o).Elem().Field(0) }

// OnParamSet records whether the parameter was present.
func (o *OptionalParam[T]) OnParamSet(isSet bool, _ any) { o.IsSet = isSet }

// Ptr returns nil when the parameter is absent.
func (o OptionalParam[T]) Ptr() *T {
	if !o.IsSet {
		return nil
	}
	v := o.Value
	return &v
}
