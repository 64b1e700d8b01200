// Package servertest runs a policy behind a real policy server on
// loopback, for tests and benchmarks of any policy.Policy: Serve runs the
// server, Loopback gives a client of it too, Parity checks that the
// client returns what the policy returns in process, and Compare
// measures what the HTTP hop costs.
package servertest

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/rlpipe/rlpipe/policy"
	"github.com/rlpipe/rlpipe/policy/openai"
	"github.com/rlpipe/rlpipe/policy/policytest"
	"github.com/rlpipe/rlpipe/policy/server"
)

// Serve serves p on a free loopback port and returns the Server and its
// base URL (http://127.0.0.1:PORT). sopts may be nil; its Addr is
// replaced. The server stops, and the test fails if it did not stop
// cleanly, when tb's test ends.
func Serve(tb testing.TB, p policy.Policy, sopts *server.Options) (*server.Server, string) {
	tb.Helper()
	var so server.Options
	if sopts != nil {
		so = *sopts
	}
	so.Addr = "127.0.0.1:0"
	srv, err := server.New(p, &so)
	if err != nil {
		tb.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	l, err := srv.Listen(ctx)
	if err != nil {
		cancel()
		tb.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ctx, l) }()
	tb.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			tb.Errorf("policy server on %s: %v", l.Addr(), err)
		}
	})
	return srv, "http://" + l.Addr().String()
}

// Loopback serves p as Serve does and returns an openai.Client of it and
// the Server. sopts and copts may be nil; the client's Endpoints and Model
// are set to the server's, its APIKey (when empty) to the server's Token.
// The client is closed before the server stops.
func Loopback(tb testing.TB, p policy.Policy, sopts *server.Options, copts *openai.Options) (*openai.Client, *server.Server) {
	tb.Helper()
	srv, url := Serve(tb, p, sopts)
	var co openai.Options
	if copts != nil {
		co = *copts
	}
	co.Endpoints = []string{url}
	co.Model = srv.Model()
	if co.APIKey == "" && sopts != nil {
		co.APIKey = sopts.Token
	}
	c, err := openai.New(&co)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { c.Close() })
	return c, srv
}

// Parity generates reqs with s in process and through c, and returns an
// error naming the first sample that differs in text, token ids,
// log-probabilities (bit for bit), finish reason, prompt tokens, policy
// version or status. Samples whose status is not OK are compared by
// status only.
func Parity(ctx context.Context, p policy.Policy, c policy.Policy, reqs []policy.Request, s policy.Sampling) error {
	want, err := p.Generate(ctx, reqs, s)
	if err != nil {
		return fmt.Errorf("in process: %w", err)
	}
	got, err := c.Generate(ctx, reqs, s)
	if err != nil {
		return fmt.Errorf("over HTTP: %w", err)
	}
	if len(got) != len(want) {
		return fmt.Errorf("over HTTP: %d requests answered, in process %d", len(got), len(want))
	}
	for i := range want {
		if len(got[i]) != len(want[i]) {
			return fmt.Errorf("request %d (%q): %d samples over HTTP, %d in process", i, reqs[i].ID, len(got[i]), len(want[i]))
		}
		for j := range want[i] {
			if err := sameSample(got[i][j], want[i][j]); err != nil {
				return fmt.Errorf("request %d (%q) sample %d: %w", i, reqs[i].ID, j, err)
			}
		}
	}
	return nil
}

func sameSample(got, want policy.Sample) error {
	if got.Status != want.Status {
		return fmt.Errorf("status %q over HTTP, %q in process (%s)", got.Status, want.Status, got.Error)
	}
	if want.Status != policy.StatusOK {
		return nil
	}
	if d := policytest.Diff(got, want); d != "" {
		return fmt.Errorf("over HTTP against in process: %s", d)
	}
	return nil
}

// Compare measures samples per second of p in process and through a
// policy server and client on loopback (set up as Loopback does, from
// sopts and copts), b.N rounds of reqs each, and reports both rates and
// their ratio "http/inprocess": the share of in-process throughput left
// after the HTTP hop. It first checks Parity, so set sopts.Model to the
// PolicyVersion p reports for the base model.
func Compare(b *testing.B, p policy.Policy, sopts *server.Options, copts *openai.Options, reqs []policy.Request, s policy.Sampling) {
	b.Helper()
	c, _ := Loopback(b, p, sopts, copts)
	ctx := context.Background()
	// Warm up both paths (connections, caches) before timing.
	if _, err := p.Generate(ctx, reqs, s); err != nil {
		b.Fatal(err)
	}
	if err := Parity(ctx, p, c, reqs, s); err != nil {
		b.Fatal(err)
	}
	var inproc, overHTTP time.Duration
	samples := 0
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		t0 := time.Now()
		if _, err := p.Generate(ctx, reqs, s); err != nil {
			b.Fatal(err)
		}
		t1 := time.Now()
		out, err := c.Generate(ctx, reqs, s)
		if err != nil {
			b.Fatal(err)
		}
		overHTTP += time.Since(t1)
		inproc += t1.Sub(t0)
		for _, ss := range out {
			for _, smp := range ss {
				if smp.Status != policy.StatusOK {
					b.Fatalf("request %q: %s: %s", smp.RequestID, smp.Status, smp.Error)
				}
			}
			samples += len(ss)
		}
	}
	b.StopTimer()
	ip := float64(samples) / inproc.Seconds()
	hp := float64(samples) / overHTTP.Seconds()
	b.ReportMetric(ip, "inprocess-samples/s")
	b.ReportMetric(hp, "http-samples/s")
	b.ReportMetric(hp/ip, "http/inprocess")
}
