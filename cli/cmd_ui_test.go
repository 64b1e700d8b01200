package cli

import (
	"context"
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
