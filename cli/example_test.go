package cli_test

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/rlpipe/rlpipe/cli"
)

// Main runs one rlpipe command line and returns its exit code; here it
// creates a store, stages a file read from standard input, commits it and
// prints it back.
func ExampleMain() {
	dir, err := os.MkdirTemp("", "rlpipe-example-")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(dir)
	store := filepath.Join(dir, "store")
	rlpipe := func(stdout io.Writer, stdin string, args ...string) int {
		return cli.Main(append([]string{"--store", store}, args...), strings.NewReader(stdin), stdout, io.Discard)
	}

	rlpipe(io.Discard, "", "init-store")
	rlpipe(io.Discard, "hello, store\n", "put", "-", "main:notes/hello.txt")
	rlpipe(io.Discard, "", "commit", "main", "-m", "say hello")
	rlpipe(os.Stdout, "", "cat", "main:notes/hello.txt")
	code := rlpipe(os.Stdout, "", "merge", "main") // DEST is missing
	fmt.Println("exit code:", code)
	// Output:
	// hello, store
	// exit code: 2
}
