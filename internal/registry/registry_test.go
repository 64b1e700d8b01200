package registry_test

import (
	"fmt"
	"slices"
	"testing"

	"github.com/rlpipe/rlpipe/internal/registry"
)

func TestRegistry(t *testing.T) {
	r := registry.New[int]("things", "kind")
	r.Register("b", 2)
	r.Register("a", 1)
	if v, ok := r.Lookup("a"); !ok || v != 1 {
		t.Errorf("Lookup(a) = %v, %v", v, ok)
	}
	if _, ok := r.Lookup("c"); ok {
		t.Error("Lookup(c) found something")
	}
	if got := r.Names(); !slices.Equal(got, []string{"a", "b"}) {
		t.Errorf("Names() = %v", got)
	}
	defer func() {
		if p := recover(); fmt.Sprint(p) != "things: Register called twice for kind a" {
			t.Errorf("a second Register of a: panic %v", p)
		}
	}()
	r.Register("a", 3)
}

func ExampleRegistry() {
	backends := registry.New[string]("policy", "kind")
	backends.Register("openai", "servers speaking the OpenAI API")
	backends.Register("embedded", "the built-in tiny model")
	v, _ := backends.Lookup("embedded")
	fmt.Println(backends.Names(), v)
	// Output: [embedded openai] the built-in tiny model
}
