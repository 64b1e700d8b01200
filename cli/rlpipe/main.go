// Command rlpipe runs RL loops for language models as versioned data
// pipelines and works with the artifact store they write to. See package
// github.com/rlpipe/rlpipe/cli for the commands.
package main

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime/pprof"

	"github.com/rlpipe/rlpipe/cli"
	"github.com/rlpipe/rlpipe/pipeline/temporalrun/devserver"
)

func main() {
	stop := profile(os.Getenv("RLPIPE_CPUPROFILE"))
	code := cli.Main(os.Args[1:], os.Stdin, os.Stdout, os.Stderr, cli.WithTemporalDevServer(startDevServer))
	stop()
	os.Exit(code)
}

// profile writes a CPU profile of this process to DIR/rlpipe-PID.pprof
// when RLPIPE_CPUPROFILE=DIR is set (for `go tool pprof`): every process
// of a run — driver, workers, store server — profiles itself.
func profile(dir string) (stop func()) {
	if dir == "" {
		return func() {}
	}
	f, err := os.Create(filepath.Join(dir, fmt.Sprintf("rlpipe-%d.pprof", os.Getpid())))
	if err == nil {
		err = pprof.StartCPUProfile(f)
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "rlpipe: RLPIPE_CPUPROFILE=%s: %v (no profile is written)\n", dir, err)
		return func() {}
	}
	return func() { pprof.StopCPUProfile(); f.Close() }
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
