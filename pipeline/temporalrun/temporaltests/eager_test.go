package temporaltests_test

import (
	"context"
	"fmt"
	"maps"
	"path/filepath"
	"sync/atomic"
	"testing"

	"github.com/rs/zerolog"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/server/common/dynamicconfig"
	"go.temporal.io/server/common/metrics"
	temporalserver "go.temporal.io/server/temporal"
	"go.temporal.io/server/temporaltest"
	"google.golang.org/grpc"

	"github.com/rlpipe/rlpipe/artifacts/local"
	"github.com/rlpipe/rlpipe/pipeline"
	"github.com/rlpipe/rlpipe/pipeline/temporalrun"
	"github.com/rlpipe/rlpipe/pipeline/temporalrun/devserver"
)

// TestEagerAttempts runs three no-op task calls of one task through the
// executor on a worker of 4 slots whose client counts how each attempt
// reached it. The first call's attempt is a regular activity: on
// `rlpipe temporal dev`'s server Temporal hands it over in its reply to
// the workflow task (eager execution), on a server with Temporal's
// defaults through the queue. (The SDK only asks for an attempt it has a
// slot no poll holds: an environment's worker polls with one fewer
// poller than its slots, so one of concurrency 1 gets none.) The call
// was short, so the next two run inside their workflow tasks (the fast
// path: a local activity, recorded as a marker) on either server.
func TestEagerAttempts(t *testing.T) {
	dev, err := devserver.Start(devserver.Options{Address: "127.0.0.1:0"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = dev.Stop() })
	plain := temporaltest.NewServer(temporaltest.WithT(t))
	for _, tc := range []struct {
		name, addr, ns string
		eager          int64
	}{
		{"rlpipe temporal dev", dev.Address(), devserver.DefaultNamespace, 1},
		{"Temporal's defaults", plain.GetFrontendHostPort(), plain.GetDefaultNamespace(), 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var eager, marked atomic.Int64
			count := func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoke grpc.UnaryInvoker, opts ...grpc.CallOption) error {
				err := invoke(ctx, method, req, reply, cc, opts...)
				if r, ok := reply.(*workflowservice.RespondWorkflowTaskCompletedResponse); ok && err == nil {
					eager.Add(int64(len(r.GetActivityTasks())))
					for _, c := range req.(*workflowservice.RespondWorkflowTaskCompletedRequest).GetCommands() {
						if c.GetCommandType() == enumspb.COMMAND_TYPE_RECORD_MARKER {
							marked.Add(1)
						}
					}
				}
				return err
			}
			c, err := client.Dial(client.Options{HostPort: tc.addr, Namespace: tc.ns, Logger: temporalrun.Logger(zerolog.Nop()),
				ConnectionOptions: client.ConnectionOptions{DialOptions: []grpc.DialOption{grpc.WithChainUnaryInterceptor(count)}}})
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			ctx := context.Background()
			st, err := local.Create(ctx, filepath.Join(t.TempDir(), "store"), "main", nil)
			if err != nil {
				t.Fatal(err)
			}
			defer st.Close()
			envs := map[string]pipeline.Settings{"x": {}}
			t.Cleanup(startWorkers(t, st, pipeline.WorkerOptions{Tasks: []*pipeline.Task{noop}, Envs: envs},
				temporalrun.WorkerOptions{Client: c, Repository: repo, Pipeline: pipe, Envs: []string{"x"}, Concurrency: map[string]int{"x": 4}}))
			x, err := temporalrun.NewExecutor(temporalrun.ExecutorOptions{Client: c, Repository: repo, Pipeline: pipe, Logger: zerolog.Nop()})
			if err != nil {
				t.Fatal(err)
			}
			r, err := pipeline.Open(ctx, st, pipeline.RunOptions{Name: "eager", Envs: envs, Executor: x, NoCache: true})
			if err != nil {
				t.Fatal(err)
			}
			defer r.Close()
			it := r.Iteration(1)
			for i := 0; i < 3; i++ {
				if err := it.Go(ctx, noop, pipeline.Call{Name: fmt.Sprintf("noop-%d", i), Params: i}).Wait(ctx); err != nil {
					t.Fatal(err)
				}
			}
			if got := eager.Load(); got != tc.eager {
				t.Errorf("%d attempts handed over eagerly, want %d", got, tc.eager)
			}
			if got := marked.Load(); got != 2 {
				t.Errorf("%d attempts ran inside their workflow tasks, want 2", got)
			}
		})
	}
}

// devConfig configures a test server as devserver does (eager attempts,
// queue readers not held to 20 polls a second), plus extra settings.
func devConfig(extra ...dynamicconfig.StaticClient) temporaltest.TestServerOption {
	dc := devserver.DynamicConfig()
	// temporaltest's own setting, which this client replaces.
	dc[dynamicconfig.ForceSearchAttributesCacheRefreshOnRead.Key()] = []dynamicconfig.ConstrainedValue{{Value: true}}
	for _, e := range extra {
		maps.Copy(dc, e)
	}
	return temporaltest.WithBaseServerOptions(temporalserver.WithDynamicConfigClient(dc), temporalserver.WithCustomMetricsHandler(metrics.NoopMetricsHandler))
}
