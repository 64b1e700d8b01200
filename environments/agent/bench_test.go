package agent_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/rlpipe/rlpipe/environments/agent"
)

// benchWorld builds a 100 MB world: 1,000 files of 100 KB from a seeded
// generator, in 10 directories.
func benchWorld(b *testing.B) *agent.World {
	b.Helper()
	c, err := agent.NewCache(b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	w, err := c.World(context.Background(), agent.WorldSpec{Name: "bench-100MB", Version: "1000x100KB seed 1",
		Build: func(_ context.Context, dir string) error {
			state := uint64(1)
			buf := make([]byte, 100<<10)
			for i := range 1000 {
				for j := 0; j < len(buf); j += 8 {
					state = state*6364136223846793005 + 1442695040888963407 // a 64-bit LCG
					for k := 0; k < 8; k++ {
						buf[j+k] = byte(state >> (8 * k))
					}
				}
				p := filepath.Join(dir, fmt.Sprintf("d%02d", i%10), fmt.Sprintf("f%04d.bin", i))
				if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
					return err
				}
				if err := os.WriteFile(p, buf, 0o644); err != nil {
					return err
				}
			}
			return nil
		}})
	if err != nil {
		b.Fatal(err)
	}
	return w
}

// BenchmarkEpisodeSetup compares a copy-on-write workspace of a 100 MB
// world with a full copy (cp -a, ModeCopy), setting up one of each per
// iteration; copy/cow is how many times faster the copy-on-write setup is.
// Teardown is not timed.
func BenchmarkEpisodeSetup(b *testing.B) {
	w := benchWorld(b)
	ctx := context.Background()
	b.ReportAllocs()
	var cow, full time.Duration
	mode := agent.ModeAuto
	for b.Loop() {
		ws, err := w.NewWorkspace(ctx, nil)
		if err != nil {
			b.Fatal(err)
		}
		cow += ws.SetupTime()
		mode = ws.Mode()
		ws.Close()
		ws, err = w.NewWorkspace(ctx, &agent.WorkspaceOptions{Mode: agent.ModeCopy})
		if err != nil {
			b.Fatal(err)
		}
		full += ws.SetupTime()
		ws.Close()
	}
	if mode != agent.ModeOverlay {
		b.Logf("copy-on-write fell back to %s: the ratio compares two copies", mode)
	}
	n := float64(b.N)
	b.ReportMetric(float64(cow.Microseconds())/n/1e3, "cow-ms/op")
	b.ReportMetric(float64(full.Microseconds())/n/1e3, "copy-ms/op")
	b.ReportMetric(float64(full)/float64(cow), "copy/cow")
}
