// Command rlpipe runs RL loops for language models as versioned data
// pipelines and works with the artifact store they write to. See package
// github.com/rlpipe/rlpipe/cli for the commands.
package main

import (
	"os"

	"github.com/rlpipe/rlpipe/cli"
	"github.com/rlpipe/rlpipe/pipeline/temporalrun/devserver"
)

func main() {
	os.Exit(cli.Main(os.Args[1:], os.Stdin, os.Stdout, os.Stderr, cli.WithTemporalDevServer(startDevServer)))
}

// startDevServer is `rlpipe temporal dev`'s server; it is linked here, in
// the binary only, because Temporal's server is large.
func startDevServer(address, dbFile string) (string, func() error, error) {
	srv, err := devserver.Start(devserver.Options{Address: address, DBFile: dbFile})
	if err != nil {
		return "", nil, err
	}
	return srv.Address(), srv.Stop, nil
}
