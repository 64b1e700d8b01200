package servertest_test

import (
	"context"
	"fmt"
	"net/http/httptest"
	"testing"

	"github.com/rlpipe/rlpipe/policy"
	"github.com/rlpipe/rlpipe/policy/openai"
	"github.com/rlpipe/rlpipe/policy/server"
	"github.com/rlpipe/rlpipe/policy/server/servertest"
)

// count is a toy policy whose sample j of a request seeded s says s+j.
type count struct{}

func (count) Generate(ctx context.Context, reqs []policy.Request, s policy.Sampling) ([][]policy.Sample, error) {
	out := make([][]policy.Sample, len(reqs))
	for i, r := range reqs {
		for j := range s.Samples() {
			smp := policy.Sample{RequestID: r.ID, Index: j, Text: fmt.Sprint(r.Seed + int64(j)),
				TokenIDs: []int32{int32(j)}, FinishReason: policy.FinishStop, PolicyVersion: "count", Status: policy.StatusOK}
			if s.Logprobs {
				smp.Logprobs = []float32{-1.0 / 3}
			}
			out[i] = append(out[i], smp)
		}
	}
	return out, nil
}

// Parity checks that a policy gives the same samples over HTTP as in
// process; a policy package runs it in its own tests, where
// servertest.Loopback(t, p, sopts, nil) sets up the server and client.
func ExampleParity() {
	srv, _ := server.New(count{}, &server.Options{Model: "count"})
	hs := httptest.NewServer(srv)
	defer hs.Close()
	c, _ := openai.New(&openai.Options{Endpoints: []string{hs.URL}, Model: "count"})
	reqs := []policy.Request{{ID: "a", Prompt: "x", Seed: 10}, {ID: "b", Messages: []policy.Message{{Role: "user", Content: "y"}}, Seed: 20}}
	err := servertest.Parity(context.Background(), count{}, c, reqs, policy.Sampling{N: 3, Temperature: 1, Logprobs: true})
	fmt.Println(err)
	// Output: <nil>
}

// Compare reports what the HTTP hop costs a policy, as a ratio measured in
// the same run.
func ExampleCompare() {
	res := testing.Benchmark(func(b *testing.B) {
		reqs := []policy.Request{{ID: "a", Prompt: "x", Seed: 10}}
		servertest.Compare(b, count{}, &server.Options{Model: "count"}, nil, reqs, policy.Sampling{N: 4, Temperature: 1})
	})
	_, ok := res.Extra["http/inprocess"]
	fmt.Println(ok)
	// Output: true
}
