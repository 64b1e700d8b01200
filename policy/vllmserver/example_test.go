package vllmserver_test

import (
	"context"
	"fmt"
	"log"

	"github.com/rlpipe/rlpipe/policy"
	"github.com/rlpipe/rlpipe/policy/openai"
	"github.com/rlpipe/rlpipe/policy/vllmserver"
)

// Serve an exported model with vLLM on the loopback and sample from it
// with the OpenAI client. (Compiled, not run: it needs the venv of
// scripts/py-venv.sh and most of a minute.)
func Example() {
	ctx := context.Background()
	py, err := vllmserver.Python(".") // $RLPIPE_PY_VENV or ./.venv-py
	if err != nil {
		log.Fatal(err) // wraps vllmserver.ErrNoVLLM when there is none
	}
	srv, err := vllmserver.Start(ctx, &vllmserver.Options{Python: py, Model: "model", Name: "tiny-arith"})
	if err != nil {
		log.Fatal(err) // the tail of vLLM's log says why
	}
	defer srv.Stop()
	c, err := openai.New(&openai.Options{Endpoints: []string{srv.URL()}, Model: srv.Name()})
	if err != nil {
		log.Fatal(err)
	}
	out, err := c.Generate(ctx, []policy.Request{{ID: "p", Prompt: "12+30=", Seed: 1}},
		policy.Sampling{N: 4, Temperature: 1, MaxTokens: 5, Logprobs: true})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(out[0][0].Text, out[0][0].TokenIDs, out[0][0].Logprobs)
}
