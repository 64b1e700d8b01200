package vllmserver_test

import (
	"context"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/rlpipe/rlpipe/policy/vllmserver"
	"github.com/rlpipe/rlpipe/policy/vllmserver/vllmtest"
)

// A real vLLM serves the tiny Llama under its name on the loopback, and
// Stop leaves no process of its group behind.
func TestStartServesAndStops(t *testing.T) {
	py := vllmtest.Python(t)
	model, _ := vllmtest.Model(t, py)
	s := vllmtest.Start(t, vllmserver.Options{Python: py, Model: model, Name: "tiny", MaxModelLen: 64})
	if !strings.HasPrefix(s.URL(), "http://127.0.0.1:") {
		t.Fatalf("URL %s: want the loopback", s.URL())
	}
	if list := vllmtest.Models(t, s.URL()); len(list) != 1 || list[0].ID != "tiny" || list[0].Root != model {
		t.Fatalf("/v1/models = %+v; want one model tiny with root %s", list, model)
	}
	if err := s.Stop(); err != nil {
		t.Fatal(err)
	}
	select {
	case <-s.Done():
	default:
		t.Fatal("Stop returned before the server exited")
	}
	if _, err := http.Get(s.URL() + "/health"); err == nil {
		t.Fatalf("%s still answers after Stop", s.URL())
	}
	if err := syscall.Kill(-s.PID(), 0); err != syscall.ESRCH {
		t.Fatalf("process group %d after Stop: %v; want no process left (ESRCH)", s.PID(), err)
	}
}

// A model vLLM cannot serve fails Start with vLLM's own reason in the log
// tail, not a bare timeout.
func TestStartReportsTheServersError(t *testing.T) {
	py := vllmtest.Python(t)
	model, _ := vllmtest.Model(t, py)
	cfgPath := filepath.Join(model, "config.json")
	b, err := os.ReadFile(cfgPath)
	if err != nil {
		t.Fatal(err)
	}
	var cfg map[string]any
	if err := json.Unmarshal(b, &cfg); err != nil {
		t.Fatal(err)
	}
	cfg["architectures"] = []string{"NoSuchModelForCausalLM"}
	b, _ = json.Marshal(cfg)
	if err := os.WriteFile(cfgPath, b, 0o644); err != nil {
		t.Fatal(err)
	}
	s, err := vllmserver.Start(context.Background(), &vllmserver.Options{Python: py, Model: model, StartTimeout: 4 * time.Minute})
	if err == nil {
		s.Stop()
		t.Fatal("Start served a model of an unknown architecture")
	}
	for _, want := range []string{"exited before answering /health", "NoSuchModelForCausalLM", "--model " + model} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error does not say %q:\n%v", want, err)
		}
	}
}
