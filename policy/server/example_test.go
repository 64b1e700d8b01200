package server_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"

	"github.com/rlpipe/rlpipe/policy"
	"github.com/rlpipe/rlpipe/policy/openai"
	"github.com/rlpipe/rlpipe/policy/server"
)

// echo is a toy policy: every sample repeats the prompt.
type echo struct{}

func (echo) Generate(ctx context.Context, reqs []policy.Request, s policy.Sampling) ([][]policy.Sample, error) {
	out := make([][]policy.Sample, len(reqs))
	for i, r := range reqs {
		for j := range s.Samples() {
			out[i] = append(out[i], policy.Sample{RequestID: r.ID, Index: j, Text: r.Prompt,
				FinishReason: policy.FinishStop, PolicyVersion: "echo", Status: policy.StatusOK})
		}
	}
	return out, nil
}

// Serve a policy on loopback and sample from it with the OpenAI client,
// as `rlpipe policy serve` and a rollout worker do.
func Example() {
	srv, err := server.New(echo{}, &server.Options{Model: "echo"}) // Addr: 127.0.0.1:0
	if err != nil {
		fmt.Println(err)
		return
	}
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	l, err := srv.Listen(ctx)
	if err != nil {
		fmt.Println(err)
		return
	}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ctx, l) }()

	c, _ := openai.New(&openai.Options{Endpoints: []string{"http://" + l.Addr().String()}, Model: "echo"})
	out, err := c.Generate(ctx, []policy.Request{{ID: "q1", Prompt: "hello"}}, policy.Sampling{N: 2})
	fmt.Println(out[0][0].Text, out[0][1].Text, out[0][1].PolicyVersion, err)

	stop() // Serve finishes the requests in flight and returns
	fmt.Println(<-served)
	// Output:
	// hello hello echo <nil>
	// <nil>
}

// Servers bind to 127.0.0.1 by default and require a token when bound to
// any other address.
func ExampleNew() {
	_, err := server.New(echo{}, &server.Options{Addr: "0.0.0.0:8000"})
	fmt.Println(err)
	_, err = server.New(echo{}, &server.Options{Addr: "0.0.0.0:8000", Token: "from-the-environment"})
	fmt.Println(err)
	// Output:
	// server: listen 0.0.0.0:8000: a policy server bound to an address other than loopback needs a token: set Options.Token (rlpipe policy serve reads it from RLPIPE_POLICY_TOKEN), or bind 127.0.0.1
	// <nil>
}

// A Server is an http.Handler; bad requests get OpenAI's error body.
func ExampleServer_ServeHTTP() {
	srv, _ := server.New(echo{}, nil)
	hs := httptest.NewServer(srv)
	defer hs.Close()

	resp, err := http.Post(hs.URL+"/v1/completions", "application/json", strings.NewReader(`{"prompt": "hi", "n": 0}`))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	fmt.Println(resp.StatusCode, string(b))
	// Output:
	// 400 {"error":{"message":"n is 0; it must be at least 1","type":"invalid_request_error","param":"n","code":null}}
}
