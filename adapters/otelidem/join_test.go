package otelidem_test

import (
	"context"
	"reflect"
	"testing"

	"github.com/idemgen/idemgen/adapters/otelidem"
	idemrt "github.com/idemgen/idemgen/runtime"
)

// Join calls every non-nil hook of every set, in order, for every field of
// Hooks (a field added to Hooks and forgotten in Join fails here).
func TestJoinCallsEveryHook(t *testing.T) {
	var calls []string
	set := func(name string) idemrt.Hooks {
		var h idemrt.Hooks
		v := reflect.ValueOf(&h).Elem()
		for i := range v.NumField() {
			field := v.Type().Field(i).Name
			f := func(context.Context, idemrt.Event) { calls = append(calls, name+"."+field) }
			v.Field(i).Set(reflect.ValueOf(f))
		}
		return h
	}
	j := otelidem.Join(set("a"), idemrt.Hooks{}, set("b"))
	v := reflect.ValueOf(j)
	for i := range v.NumField() {
		field := v.Type().Field(i).Name
		calls = nil
		f, ok := v.Field(i).Interface().(func(context.Context, idemrt.Event))
		if !ok || f == nil {
			t.Errorf("Join left %s nil", field)
			continue
		}
		f(context.Background(), idemrt.Event{})
		if len(calls) != 2 || calls[0] != "a."+field || calls[1] != "b."+field {
			t.Errorf("%s called %v", field, calls)
		}
	}
	if h := otelidem.Join(); h.Replayed != nil {
		t.Error("Join() set a hook")
	}
}

// Hooks sets every hook of the runtime: an outcome without a counter would
// go unseen.
func TestHooksCoverEveryEvent(t *testing.T) {
	m, err := otelidem.New(nil)
	if err != nil {
		t.Fatal(err)
	}
	v := reflect.ValueOf(m.Hooks())
	for i := range v.NumField() {
		if v.Field(i).IsNil() {
			t.Errorf("Hooks leaves %s nil", v.Type().Field(i).Name)
		}
	}
}
