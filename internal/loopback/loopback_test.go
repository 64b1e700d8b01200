package loopback

import (
	"context"
	"errors"
	"testing"
)

func TestPlainlyPublic(t *testing.T) {
	for addr, want := range map[string]bool{
		"127.0.0.1:8000": false, "[::1]:80": false, "localhost:1": false, "example.test:1": false,
		":8000": true, "0.0.0.0:1": true, "10.1.2.3:1": true, "[2001:db8::1]:1": true, "nonsense": false,
	} {
		if got := PlainlyPublic(addr); got != want {
			t.Errorf("PlainlyPublic(%q) = %v, want %v", addr, got, want)
		}
	}
}

func TestListenRefusesWithoutToken(t *testing.T) {
	refused := errors.New("refused")
	refuse := func(string) error { return refused }
	ctx := context.Background()
	if _, err := Listen(ctx, "0.0.0.0:0", false, refuse); !errors.Is(err, refused) {
		t.Errorf("0.0.0.0 without a token: %v", err)
	}
	l, err := Listen(ctx, "127.0.0.1:0", false, refuse)
	if err != nil {
		t.Fatal(err)
	}
	l.Close()
	l, err = Listen(ctx, "0.0.0.0:0", true, refuse)
	if err != nil {
		t.Fatalf("0.0.0.0 with a token: %v", err)
	}
	l.Close()
}
