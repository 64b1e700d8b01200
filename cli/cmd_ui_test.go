package cli

import (
	"bufio"
	"context"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rs/zerolog"

	"github.com/rlpipe/rlpipe/artifacts/local"
	"github.com/rlpipe/rlpipe/ui"
)

func TestUIRefusesPublicAddressWithoutToken(t *testing.T) {
	st, err := local.Create(context.Background(), filepath.Join(t.TempDir(), "s"), "main", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	err = uiServe(context.Background(), st, uiOptions{addr: "0.0.0.0:0"}, "", zerolog.Nop(), printer{w: io.Discard})
	if err == nil || !strings.Contains(err.Error(), "needs a token") || !strings.Contains(err.Error(), ui.TokenEnv) || exitCode(err) != ExitFailure {
		t.Fatalf("err = %v (exit %d): want a refusal naming %s", err, exitCode(err), ui.TokenEnv)
	}
}

// TestUIServe serves the UI on loopback, reads the API, and stops.
func TestUIServe(t *testing.T) {
	st, err := local.Create(context.Background(), filepath.Join(t.TempDir(), "s"), "main", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	pr, pw := io.Pipe()
	done := make(chan error, 1)
	go func() {
		done <- uiServe(ctx, st, uiOptions{addr: "127.0.0.1:0"}, "", zerolog.Nop(), printer{w: pw})
		pw.Close()
	}()
	line, err := bufio.NewReader(pr).ReadString('\n')
	if err != nil {
		t.Fatal(err)
	}
	go io.Copy(io.Discard, pr)
	url := strings.Fields(line)[5] // "serving the rlpipe UI on http://ADDR/ (...)"
	resp, err := http.Get(url + "api/runs")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || strings.TrimSpace(string(body)) != `{"runs":[]}` {
		t.Fatalf("GET %sapi/runs: %d %s", url, resp.StatusCode, body)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("serve after cancel: %v", err)
	}
}
