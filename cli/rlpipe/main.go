// Command rlpipe runs RL loops for language models as versioned data
// pipelines and works with the artifact store they write to. See package
// github.com/rlpipe/rlpipe/cli for the commands.
package main

import (
	"os"

	"github.com/rlpipe/rlpipe/cli"
)

func main() {
	os.Exit(cli.Main(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}
