package devserver

import (
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"go.temporal.io/server/common/cluster"
	"go.temporal.io/server/common/config"
	"go.temporal.io/server/common/dynamicconfig"
	"go.temporal.io/server/common/log"
	"go.temporal.io/server/common/metrics"
	sqliteplugin "go.temporal.io/server/common/persistence/sql/sqlplugin/sqlite"
	"go.temporal.io/server/schema/sqlite"
	"go.temporal.io/server/temporal"
)

// Defaults.
const (
	// DefaultAddress is where the frontend listens: Temporal's usual
	// port, and the address rlpipe's commands dial when --temporal is
	// not given.
	DefaultAddress = "127.0.0.1:7233"
	// DefaultNamespace is registered at start: the namespace rlpipe's
	// commands use when --namespace is not given.
	DefaultNamespace = "default"
)

// Errors.
var (
	// ErrNotLoopback is returned for an address other hosts could reach.
	ErrNotLoopback = errors.New("the dev server listens on loopback only")
	// ErrStart wraps a failure to start the server (a port in use, a
	// database file that cannot be opened).
	ErrStart = errors.New("start the Temporal dev server")
)

// Options configure a dev server; the zero value is an in-memory server
// on DefaultAddress with DefaultNamespace.
type Options struct {
	// Address is the frontend's HOST:PORT; HOST must be a loopback IP or
	// "localhost", PORT 0 picks a free port.
	Address string
	// DBFile, when set, keeps the server's state in this SQLite file
	// (created when missing) so that runs survive a restart; empty keeps
	// it in memory.
	DBFile string
	// Namespaces are registered at start (default DefaultNamespace).
	Namespaces []string
}

// Server is a running dev server.
type Server struct {
	srv  temporal.Server
	addr string
}

// Address is the frontend's HOST:PORT, for --temporal.
func (s *Server) Address() string { return s.addr }

// Stop shuts the server down; in-memory state is gone after it.
func (s *Server) Stop() error { return s.srv.Stop() }

// Start starts a dev server and returns once its frontend listens.
func Start(o Options) (*Server, error) {
	if o.Address == "" {
		o.Address = DefaultAddress
	}
	if len(o.Namespaces) == 0 {
		o.Namespaces = []string{DefaultNamespace}
	}
	host, portText, err := net.SplitHostPort(o.Address)
	if err != nil {
		return nil, fmt.Errorf("%w: address %q: %v (give HOST:PORT, e.g. %s)", ErrStart, o.Address, err, DefaultAddress)
	}
	ip := net.ParseIP(host)
	if host == "localhost" {
		ip = net.IPv4(127, 0, 0, 1)
	}
	if ip == nil || !ip.IsLoopback() {
		return nil, fmt.Errorf("%w: %q is not a loopback address; use 127.0.0.1:PORT here, and a Temporal cluster for workers on other hosts (docs/DEPLOY.md)", ErrNotLoopback, o.Address)
	}
	port, err := strconv.Atoi(portText)
	if err != nil || port < 0 || port > 65535 {
		return nil, fmt.Errorf("%w: address %q: port %q is not a number from 0 to 65535", ErrStart, o.Address, portText)
	}
	if port != 0 {
		l, err := net.Listen("tcp", net.JoinHostPort(ip.String(), portText))
		if err != nil {
			return nil, fmt.Errorf("%w: listen on %s: %v (another Temporal server? stop it, or pass another --addr)", ErrStart, o.Address, err)
		}
		l.Close()
	}
	ports, err := freePorts(ip, 8)
	if err != nil {
		return nil, fmt.Errorf("%w: find free ports on %s: %v", ErrStart, ip, err)
	}
	if port == 0 {
		port = ports[7]
	}
	cfg := serverConfig(ip.String(), port, ports, sqlConfig(o.DBFile))
	sqlCfg := cfg.Persistence.DataStores[sqliteplugin.PluginName].SQL
	if o.DBFile != "" {
		if _, err := os.Stat(o.DBFile); errors.Is(err, os.ErrNotExist) {
			if err := os.MkdirAll(filepath.Dir(o.DBFile), 0o755); err != nil {
				return nil, fmt.Errorf("%w: create the directory of %s: %v", ErrStart, o.DBFile, err)
			}
			if err := sqlite.SetupSchema(sqlCfg); err != nil {
				return nil, fmt.Errorf("%w: create the database %s: %v", ErrStart, o.DBFile, err)
			}
		}
	}
	var nss []*sqlite.NamespaceConfig
	for _, name := range o.Namespaces {
		ns, err := sqlite.NewNamespaceConfig(clusterName, name, false, nil)
		if err != nil {
			return nil, fmt.Errorf("%w: namespace %s: %v", ErrStart, name, err)
		}
		nss = append(nss, ns)
	}
	if err := sqlite.CreateNamespaces(sqlCfg, nss...); err != nil {
		return nil, fmt.Errorf("%w: register namespaces in %s: %v", ErrStart, dbName(o.DBFile), err)
	}
	srv, err := temporal.NewServer(
		temporal.WithConfig(cfg),
		temporal.ForServices(temporal.DefaultServices),
		temporal.WithLogger(log.NewNoopLogger()),
		temporal.WithDynamicConfigClient(DynamicConfig()),
		// Nothing reads the server's metrics; recording them costs about
		// a twentieth of its CPU per task.
		temporal.WithCustomMetricsHandler(metrics.NoopMetricsHandler),
	)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrStart, err)
	}
	if err := srv.Start(); err != nil {
		return nil, fmt.Errorf("%w on %s: %v (is another server on that port? pass another --addr)", ErrStart, o.Address, err)
	}
	return &Server{srv: srv, addr: net.JoinHostPort(ip.String(), strconv.Itoa(port))}, nil
}

// DynamicConfig is the dev server's dynamic config, three changes from
// Temporal's defaults, each a wait less per task (docs/DEPLOY.md,
// "Overhead per task"):
//
//   - Eager activity execution: a worker that completes a task
//     workflow's workflow task and has a free attempt slot gets the
//     attempt activity it scheduled in the reply and runs it at once,
//     instead of the activity going through the queue to a poller, with
//     the same retries, heartbeats and timeouts.
//   - The history service's queue readers (transfer, timer, visibility,
//     outbound) may poll their shard up to 2,000 times a second instead
//     of 20. A cluster spreads workflows over hundreds of shards; this
//     server has one, so at 20 polls a second every workflow or activity
//     task waited up to 50 ms to be dispatched: 45 ms on average per
//     hop, three hops per task call, measured (BenchmarkTemporalTaskOverhead).
//   - One task-queue partition instead of four: with four, an attempt
//     added to a partition no poll waited on went through the backlog
//     and the forwarder, a 2 s stall for about one attempt in a hundred.
//     (A --db-file written with four partitions may hold attempts in the
//     three this server no longer reads.)
//
// It returns a new value on each call; rlpipe's Temporal tests start
// their servers with it too.
func DynamicConfig() dynamicconfig.StaticClient {
	rps := []dynamicconfig.ConstrainedValue{{Value: 2000}}
	return dynamicconfig.StaticClient{
		dynamicconfig.EnableActivityEagerExecution.Key():        []dynamicconfig.ConstrainedValue{{Value: true}},
		dynamicconfig.TransferProcessorMaxPollRPS.Key():         rps,
		dynamicconfig.TimerProcessorMaxPollRPS.Key():            rps,
		dynamicconfig.VisibilityProcessorMaxPollRPS.Key():       rps,
		dynamicconfig.OutboundProcessorMaxPollRPS.Key():         rps,
		dynamicconfig.MatchingNumTaskqueueReadPartitions.Key():  []dynamicconfig.ConstrainedValue{{Value: 1}},
		dynamicconfig.MatchingNumTaskqueueWritePartitions.Key(): []dynamicconfig.ConstrainedValue{{Value: 1}},
	}
}

const clusterName = "active"

func dbName(file string) string {
	if file == "" {
		return "memory"
	}
	return file
}

// sqlConfig is SQLite in file, or in memory (a name of its own, shared
// by the server's connections) when file is empty.
func sqlConfig(file string) *config.SQL {
	c := &config.SQL{PluginName: sqliteplugin.PluginName, ConnectAttributes: map[string]string{}, DatabaseName: file}
	if file == "" {
		c.DatabaseName = fmt.Sprintf("rlpipe-dev-%d", os.Getpid())
		c.ConnectAttributes["mode"] = "memory"
		c.ConnectAttributes["cache"] = "shared"
	} else {
		c.ConnectAttributes["mode"] = "rwc"
	}
	return c
}

// serverConfig is one cluster of one history shard whose four services
// run in this process on ip: the frontend on port, the others and every
// membership listener on ports from free.
func serverConfig(ip string, port int, free []int, sql *config.SQL) *config.Config {
	frontend := ip + ":" + strconv.Itoa(port)
	service := func(grpc, membership int) config.Service {
		return config.Service{RPC: config.RPC{GRPCPort: grpc, MembershipPort: membership, BindOnIP: ip}}
	}
	return &config.Config{
		Global: config.Global{Membership: config.Membership{MaxJoinDuration: 30 * time.Second, BroadcastAddress: ip}},
		Persistence: config.Persistence{
			DefaultStore:     sqliteplugin.PluginName,
			VisibilityStore:  sqliteplugin.PluginName,
			NumHistoryShards: 1,
			DataStores:       map[string]config.DataStore{sqliteplugin.PluginName: {SQL: sql}},
		},
		ClusterMetadata: &cluster.Config{
			FailoverVersionIncrement: 10,
			MasterClusterName:        clusterName,
			CurrentClusterName:       clusterName,
			ClusterInformation: map[string]cluster.ClusterInformation{
				clusterName: {Enabled: true, InitialFailoverVersion: 1, RPCAddress: frontend},
			},
		},
		DCRedirectionPolicy: config.DCRedirectionPolicy{Policy: "noop"},
		Services: map[string]config.Service{
			"frontend": service(port, free[0]),
			"history":  service(free[1], free[2]),
			"matching": service(free[3], free[4]),
			"worker":   service(free[5], free[6]),
		},
		Archival: config.Archival{
			History:    config.HistoryArchival{State: "disabled"},
			Visibility: config.VisibilityArchival{State: "disabled"},
		},
		NamespaceDefaults: config.NamespaceDefaults{Archival: config.ArchivalNamespaceDefaults{
			History:    config.HistoryArchivalNamespaceDefaults{State: "disabled"},
			Visibility: config.VisibilityArchivalNamespaceDefaults{State: "disabled"},
		}},
		PublicClient: config.PublicClient{HostPort: frontend},
	}
}

// freePorts returns n ports free on ip now, all different: each is held
// open until all are found.
func freePorts(ip net.IP, n int) ([]int, error) {
	var ports []int
	for range n {
		l, err := net.ListenTCP("tcp", &net.TCPAddr{IP: ip})
		if err != nil {
			return nil, err
		}
		defer l.Close()
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}
