package cli

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/rs/zerolog"

	"github.com/rlpipe/rlpipe/ui"
)

func TestUIRefusesPublicAddressWithoutToken(t *testing.T) {
	st := newLocalStore(t)
	err := uiServe(context.Background(), st, uiOptions{addr: "0.0.0.0:0"}, "", zerolog.Nop(), printer{w: io.Discard})
	if err == nil || !strings.Contains(err.Error(), "needs a token") || !strings.Contains(err.Error(), ui.TokenEnv) || exitCode(err) != ExitFailure {
		t.Fatalf("err = %v (exit %d): want a refusal naming %s", err, exitCode(err), ui.TokenEnv)
	}
}

// TestUIServe serves the UI on loopback, reads the API, and stops.
func TestUIServe(t *testing.T) {
	st := newLocalStore(t)
	// "serving the rlpipe UI on http://ADDR/ (...)"
	url, stop := serving(t, 5, func(ctx context.Context, p printer) error {
		return uiServe(ctx, st, uiOptions{addr: "127.0.0.1:0"}, "", zerolog.Nop(), p)
	})
	resp, err := http.Get(url + "api/runs")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || strings.TrimSpace(string(body)) != `{"runs":[]}` {
		t.Fatalf("GET %sapi/runs: %d %s", url, resp.StatusCode, body)
	}
	stop()
}

// TestUIEffectiveConfig runs the stand-in example and reads its run
// from the UI that `rlpipe ui` serves: the effective config holds the
// defaults the file leaves out (each stage's environment) beside what it
// sets, and the sample stage's API key redacted, never its value.
func TestUIEffectiveConfig(t *testing.T) {
	h, cfg := newRunHarness(t, "1ms")
	h.ok("run", "-f", cfg)
	st := h.openStore()
	url, stop := serving(t, 5, func(ctx context.Context, p printer) error {
		return uiServe(ctx, st, uiOptions{addr: "127.0.0.1:0"}, "", zerolog.Nop(), p)
	})
	defer stop()
	resp, err := http.Get(url + "api/runs/standin")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	var d ui.RunDetail
	if err := json.Unmarshal(body, &d); err != nil || resp.StatusCode != http.StatusOK || d.Config == nil {
		t.Fatalf("GET %sapi/runs/standin: %d %v %s", url, resp.StatusCode, err, body)
	}
	if strings.Contains(readFile(t, cfg), "env: train") {
		t.Fatal("the example names the train stage's environment; pick another default")
	}
	for k, want := range map[string]string{"stages.train.env": "train", "stages.train.kind": "standin", "iterations": "3",
		"stages.sample.environment.JUDGE_API_KEY": "<redacted>"} {
		if got := d.Config.Keys[k]; got != want {
			t.Errorf("effective config: %s = %q, want %q", k, got, want)
		}
	}
	if d.Config.Path != "run/config.yaml" || d.Config.Error != "" || strings.Contains(string(body), "hunter2") {
		t.Errorf("config %s, error %q; or the body holds the secret:\n%s", d.Config.Path, d.Config.Error, body)
	}
}
