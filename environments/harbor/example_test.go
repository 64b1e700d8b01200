package harbor_test

import (
	"fmt"
	"path/filepath"

	"github.com/rlpipe/rlpipe/environments/harbor"
)

// Load reads a task directory: its name, its instruction, and the world
// its Dockerfile makes.
func ExampleLoad() {
	t, err := harbor.Load(filepath.Join("testdata", "tasks", "word-stats"))
	if err != nil {
		panic(err)
	}
	d := t.Dockerfile
	fmt.Println(t.Name, t.VerifierTimeout())
	fmt.Println("from", d.From, "(ignored); workdir", d.Workdir, "; directories", d.Tops)
	for _, in := range d.Steps {
		fmt.Printf("line %d: %s %s\n", in.Line, in.Op, in.Args)
	}
	// Output:
	// rlpipe/word-stats 30s
	// from ubuntu:24.04 (ignored); workdir /app ; directories [app root]
	// line 2: WORKDIR /app
	// line 3: ENV DATA_DIR=/app/data
	// line 4: COPY text.txt /app/data/text.txt
}
