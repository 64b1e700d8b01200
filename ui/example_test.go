package ui_test

import (
	"context"
	"fmt"
	"io"
	"net/http/httptest"
	"os"
	"path/filepath"

	"github.com/rlpipe/rlpipe/artifacts/local"
	"github.com/rlpipe/rlpipe/ui"
)

// A Server is an http.Handler over a store: mount it anywhere, or run it
// with Listen and Serve (loopback unless Options.Token is set).
func ExampleNew() {
	dir, _ := os.MkdirTemp("", "rlpipe-ui-example")
	defer os.RemoveAll(dir)
	ctx := context.Background()
	st, err := local.Create(ctx, filepath.Join(dir, "store"), "main", nil)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer st.Close()

	srv, err := ui.New(st, nil) // nil: 127.0.0.1:8080, no token
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, path := range []string{"/api/runs", "/api/runs/nope"} {
		req := httptest.NewRequest("GET", path, nil)
		req.Host = "127.0.0.1:8080"
		rec := httptest.NewRecorder()
		srv.ServeHTTP(rec, req)
		body, _ := io.ReadAll(rec.Body)
		fmt.Print(rec.Code, " ", string(body))
	}
	_, err = ui.New(st, &ui.Options{Addr: "0.0.0.0:8080"})
	fmt.Println(err != nil)
	// Output:
	// 200 {"runs":[]}
	// 404 {"error":"no run \"nope\" in this store (no branch runs-nope); /api/runs lists the runs","status":404}
	// true
}
