package cli

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/rs/zerolog"
)

func TestPolicyServeRefusesPublicAddressWithoutToken(t *testing.T) {
	h := newHarness(t)
	r := h.runRaw("policy", "serve", "--addr", "0.0.0.0:0")
	if r.code != 1 || !strings.Contains(r.stderr, "needs a token") || !strings.Contains(r.stderr, policyTokenEnv) {
		t.Fatalf("exit %d, stderr %q: want a refusal naming %s", r.code, r.stderr, policyTokenEnv)
	}
}

func TestPolicyServeUnknownModel(t *testing.T) {
	h := newHarness(t)
	r := h.runRaw("policy", "serve", "--model", "/nonexistent/w.safetensors")
	if r.code != 1 || !strings.Contains(r.stderr, "/nonexistent/w.safetensors") {
		t.Fatalf("exit %d, stderr %q", r.code, r.stderr)
	}
}

// TestPolicyServe serves the embedded model on loopback and lists it.
func TestPolicyServe(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	pr, pw := io.Pipe()
	done := make(chan error, 1)
	go func() {
		done <- policyServe(ctx, policyServeOptions{addr: "127.0.0.1:0", model: "tiny-arith"}, "", zerolog.Nop(), printer{w: pw})
		pw.Close()
	}()
	line, err := bufio.NewReader(pr).ReadString('\n')
	if err != nil {
		t.Fatal(err)
	}
	go io.Copy(io.Discard, pr)
	url := strings.Fields(line)[3] // "serving VERSION on http://ADDR (...)"
	resp, err := http.Get(url + "/v1/models")
	if err != nil {
		t.Fatal(err)
	}
	var models struct {
		Data []struct{ ID string } `json:"data"`
	}
	err = json.NewDecoder(resp.Body).Decode(&models)
	resp.Body.Close()
	if err != nil || len(models.Data) != 1 || !strings.HasPrefix(models.Data[0].ID, "tiny-arith@") {
		t.Fatalf("models %+v, %v", models, err)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("serve after cancel: %v", err)
	}
}
