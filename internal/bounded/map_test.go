package bounded

import (
	"maps"
	"testing"
)

func TestMap(t *testing.T) {
	type op struct {
		add  bool // Add, else Put
		k    string
		v    int
		want bool // what Add returns
	}
	for _, c := range []struct {
		name string
		max  int
		ops  []op
		held map[string]int // what Get finds afterwards, of the keys a..e
	}{
		{name: "empty", max: 2, held: map[string]int{}},
		{name: "put below the bound", max: 3, ops: []op{{k: "a", v: 1}, {k: "b", v: 2}},
			held: map[string]int{"a": 1, "b": 2}},
		{name: "put replaces", max: 3, ops: []op{{k: "a", v: 1}, {k: "a", v: 2}},
			held: map[string]int{"a": 2}},
		{name: "put into a full map empties it", max: 2, ops: []op{{k: "a", v: 1}, {k: "b", v: 2}, {k: "c", v: 3}},
			held: map[string]int{"c": 3}},
		{name: "replacing in a full map empties it too", max: 2, ops: []op{{k: "a", v: 1}, {k: "b", v: 2}, {k: "b", v: 5}},
			held: map[string]int{"b": 5}},
		{name: "add a new key", max: 2, ops: []op{{add: true, k: "a", v: 1, want: true}},
			held: map[string]int{"a": 1}},
		{name: "add keeps the value there", max: 2, ops: []op{{k: "a", v: 1}, {add: true, k: "a", v: 9, want: false}},
			held: map[string]int{"a": 1}},
		{name: "add into a full map empties it", max: 2, ops: []op{
			{add: true, k: "a", v: 1, want: true}, {add: true, k: "b", v: 2, want: true}, {add: true, k: "c", v: 3, want: true}, {add: true, k: "a", v: 4, want: true}},
			held: map[string]int{"c": 3, "a": 4}},
	} {
		t.Run(c.name, func(t *testing.T) {
			m := NewMap[string, int](c.max)
			for i, o := range c.ops {
				if !o.add {
					m.Put(o.k, o.v)
					continue
				}
				if got := m.Add(o.k, o.v); got != o.want {
					t.Errorf("op %d: Add(%q, %d) = %v, want %v", i, o.k, o.v, got, o.want)
				}
			}
			held := map[string]int{}
			for _, k := range []string{"a", "b", "c", "d", "e"} {
				if v, ok := m.Get(k); ok {
					held[k] = v
				}
			}
			if !maps.Equal(held, c.held) || m.Len() != len(c.held) {
				t.Errorf("holds %v (Len %d), want %v", held, m.Len(), c.held)
			}
		})
	}
}
