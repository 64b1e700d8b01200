package policytest

import "testing"

// testGolden: every Golden of the backend returns exactly its samples.
func testGolden(f *fixture) {
	if len(f.b.Golden) == 0 {
		f.t.Skip("the backend pins no samples (Backend.Golden)")
	}
	loaded := false
	for _, g := range f.b.Golden {
		if g.Sampling.Adapter == AdapterName && !loaded {
			f.load()
			loaded = true
		}
		f.t.Run(g.Name, func(t *testing.T) {
			out, err := f.b.Policy.Generate(f.ctx, g.Requests, g.Sampling)
			if err != nil {
				t.Fatalf("generate: %v", err)
			}
			same(t, g.Name, out, g.Want)
		})
	}
}
