package layers

import (
	"bytes"
	"fmt"
	"maps"
	"os/exec"
	"slices"
	"sort"
	"strings"
	"testing"
)

const module = "github.com/rlpipe/rlpipe/"

// layer is a rung of the tree: its units are folders below the module,
// side by side.
type layer struct {
	name  string
	units []string
}

// layers are the tree's layers, lowest first (the package doc says what
// each holds). A package may import its own unit and the units of lower
// layers; see check for the whole rule.
var layers = []layer{
	{"basics", []string{"internal"}},
	{"store", []string{"artifacts"}},
	{"floors", []string{"policy", "sandbox", "trackers"}},
	{"environment contract", []string{"environments"}},
	{"engine", []string{"pipeline"}},
	{"advantages", []string{"advantages"}},
	{"kind contract", []string{"pipeline/kind"}},
	{"config", []string{"pipeline/config"}},
	{"loop", []string{"rollouts", "rewards", "trainers", "evaluators", "reports", "environments/agent", "environments/arith", "environments/datasets", "environments/episodes", "environments/guess", "environments/skyrlgym", "pipeline/standin", "pipeline/driver"}},
	{"worlds' environments", []string{"environments/harbor"}},
	{"assembly", []string{"cli/kinds", "ui"}},
	{"command", []string{"cli"}},
	{"examples", []string{"examples", "bench"}},
}

// fixtures are the units any test may import, whatever its layer.
var fixtures = []string{
	"pipeline/standin", // stand-in stages: the engine's tests run loops of them
	"cli/kinds",        // the registry: a test that needs every kind reads it
	// the shipped toy environments: the environment runner's tests play them
	"environments/arith",
	"environments/guess",
}

// temporalrun is the one package below the command that may link
// Temporal, with its subpackages; the layers from temporalFrom up (the
// command and the examples) wire the executor and may link it too.
const (
	temporalrun  = "pipeline/temporalrun"
	temporalFrom = "command"
)

// debt are the rule-breaking edges still in the tree (edge.String()), each
// with the issue that removes it. A new edge is a design question (which
// layer should hold the shared noun?), not a line to add here.
var debt = map[string]string{}

// edge is one import: from and to are paths below the module, or whole
// import paths for packages outside it.
type edge struct {
	from, to string
	test     bool // the import is in a _test.go file of from
}

func (e edge) String() string {
	if e.test {
		return e.from + " (test) → " + e.to
	}
	return e.from + " → " + e.to
}

// place is the layer (its index in layers) and the unit holding pkg: the
// longest unit that is pkg or a folder above it. ok is false for a
// package in no layer, and for one outside the module.
func place(pkg string) (li int, unit string, ok bool) {
	for i, l := range layers {
		for _, u := range l.units {
			if (pkg == u || strings.HasPrefix(pkg, u+"/")) && len(u) > len(unit) {
				li, unit, ok = i, u, true
			}
		}
	}
	return li, unit, ok
}

func layerIndex(name string) int {
	return slices.IndexFunc(layers, func(l layer) bool { return l.name == name })
}

// rules are the facts check needs beyond the layer list.
type rules struct {
	// temporal are the packages that link go.temporal.io (a package of it,
	// or one with a package of it among its dependencies).
	temporal map[string]bool
}

// check is why e breaks the import rules, or "" when it keeps them.
func (r rules) check(e edge) string {
	if e.from == e.to {
		return "" // an external test of its package: the package's own edges say what it links
	}
	lf, uf, okf := place(e.from)
	lt, ut, okt := place(e.to)
	if okf && okt && uf != ut {
		fixture := e.test && slices.Contains(fixtures, ut)
		switch {
		case fixture:
		case lt > lf:
			hint := "move what both need down to a layer the importer reaches, or declare the small interface it needs where it is used"
			if e.test {
				hint += "; a test may also use another unit of its own layer, and the fixtures " + strings.Join(fixtures[:len(fixtures)-1], ", ") + " and " + fixtures[len(fixtures)-1]
			}
			return fmt.Sprintf("layer %q (%s) imports layer %q (%s), which is above it; a package imports only its own layer or lower: %s", layers[lf].name, uf, layers[lt].name, ut, hint)
		case lt == lf && !e.test:
			return fmt.Sprintf("%s and %s sit side by side in layer %q and import none of each other: move what both need to a lower layer both import", uf, ut, layers[lf].name)
		}
	}
	if r.linksTemporal(e.to) && !temporalAllowed(e.from) {
		return fmt.Sprintf("%s links go.temporal.io, which only %s and the layers from %q up may link: below the command, an executor is a pipeline.Executor value the command builds", e.to, temporalrun, temporalFrom)
	}
	return ""
}

// linksTemporal is whether importing pkg brings Temporal in: pkg is
// Temporal's, a package allowed to link it, or one outside the module
// that does. A package of the module that links it without being allowed
// to is not counted: its own edge that brings Temporal in is the one
// reported, not every edge above it.
func (r rules) linksTemporal(pkg string) bool {
	if strings.HasPrefix(pkg, "go.temporal.io/") || pkg == temporalrun || strings.HasPrefix(pkg, temporalrun+"/") {
		return true
	}
	_, _, inModule := place(pkg)
	return r.temporal[pkg] && (!inModule || temporalAllowed(pkg))
}

func temporalAllowed(pkg string) bool {
	if pkg == temporalrun || strings.HasPrefix(pkg, temporalrun+"/") {
		return true
	}
	li, _, ok := place(pkg)
	return ok && li >= layerIndex(temporalFrom)
}

// pkg is one package of the module as go list reports it, paths below the
// module for its own packages.
type pkg struct {
	path                string
	imports, testImport []string
}

// load lists the module's packages with their imports and test imports,
// and the rules' facts: which packages, the module's and others, link
// Temporal.
func load(t *testing.T) ([]pkg, rules) {
	t.Helper()
	cmd := exec.Command("go", "list", "-deps", "-test", "-f",
		`{{.ImportPath}}|{{join .Imports " "}}|{{join .TestImports " "}} {{join .XTestImports " "}}|{{join .Deps " "}}`, module+"...")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list the module's packages: %v\n%s", err, stderr.String())
	}
	trim := func(s string) []string {
		var out []string
		for _, f := range strings.Fields(s) {
			out = append(out, strings.TrimPrefix(f, module))
		}
		return out
	}
	var pkgs []pkg
	r := rules{temporal: map[string]bool{}}
	for _, line := range strings.Split(string(bytes.TrimSpace(out)), "\n") {
		f := strings.Split(line, "|")
		if len(f) != 4 {
			t.Fatalf("go list: unexpected line %q", line)
		}
		path := f[0]
		if strings.Contains(path, " ") || strings.HasSuffix(path, ".test") {
			continue // a package compiled for a test, or a test's main
		}
		rel := strings.TrimPrefix(path, module)
		if slices.ContainsFunc(strings.Fields(f[3]), func(d string) bool { return strings.HasPrefix(d, "go.temporal.io/") }) {
			r.temporal[rel] = true
		}
		if strings.HasPrefix(path, module) {
			pkgs = append(pkgs, pkg{path: rel, imports: trim(f[1]), testImport: trim(f[2])})
		}
	}
	return pkgs, r
}

// violations are the module's edges that break the rules, and its
// packages in no layer.
func violations(pkgs []pkg, r rules) (bad map[string]string, unplaced []string) {
	bad = map[string]string{}
	for _, p := range pkgs {
		if _, _, ok := place(p.path); !ok {
			unplaced = append(unplaced, p.path)
			continue
		}
		for _, test := range []bool{false, true} {
			imps := p.imports
			if test {
				imps = p.testImport
			}
			for _, to := range imps {
				e := edge{from: p.path, to: to, test: test}
				if why := r.check(e); why != "" {
					bad[e.String()] = why
				}
			}
		}
	}
	return bad, unplaced
}

func TestLayers(t *testing.T) {
	pkgs, r := load(t)
	// The Temporal rule reads go list's dependencies: without them it
	// would pass by seeing nothing.
	for _, p := range []string{temporalrun, "cli"} {
		if !r.temporal[p] {
			t.Fatalf("go list shows %s not linking go.temporal.io: the Temporal rule reads nothing", p)
		}
	}
	bad, unplaced := violations(pkgs, r)
	for _, p := range unplaced {
		t.Errorf("%s is in no layer: add its folder to a layer in internal/layers and docs/ARCHITECTURE.md (Layers)", p)
	}
	var fresh, gone []string
	for e := range bad {
		if _, ok := debt[e]; !ok {
			fresh = append(fresh, e)
		}
	}
	for e := range debt {
		if _, ok := bad[e]; !ok {
			gone = append(gone, e)
		}
	}
	sort.Strings(fresh)
	sort.Strings(gone)
	for _, e := range fresh {
		t.Errorf("%s: %s (docs/ARCHITECTURE.md, Layers)", e, bad[e])
	}
	for _, e := range gone {
		t.Errorf("%s: this edge is gone; remove it from the debt table (%s)", e, debt[e])
	}
}

// TestLayerList checks the list itself: each unit in one layer, each
// fixture and the Temporal names in it.
func TestLayerList(t *testing.T) {
	seen := map[string]string{}
	for _, l := range layers {
		for _, u := range l.units {
			if prev, ok := seen[u]; ok {
				t.Errorf("unit %s is in layers %q and %q", u, prev, l.name)
			}
			seen[u] = l.name
		}
	}
	for _, f := range fixtures {
		if _, u, _ := place(f); u != f {
			t.Errorf("fixture %s is not a unit of the list", f)
		}
	}
	if _, _, ok := place(temporalrun); !ok || layerIndex(temporalFrom) < 0 {
		t.Errorf("%s or layer %q is not in the list", temporalrun, temporalFrom)
	}
}

// TestRulesBite feeds probe edges to the rule: each names a way the tree
// could go wrong, and must be refused with its reason; the edges the
// tree relies on must pass.
func TestRulesBite(t *testing.T) {
	// The facts of the tree as it is: the command links Temporal through
	// temporalrun, nothing else does.
	r := rules{temporal: map[string]bool{"cli": true, "cli/rlpipe": true, "examples/exampletest": true, "example.com/wraps/temporal": true}}
	for _, tc := range []struct {
		name string
		e    edge
		want string
	}{
		{"a floor imports the engine", edge{from: "policy", to: "pipeline"},
			`layer "floors" (policy) imports layer "engine" (pipeline), which is above it; a package imports only its own layer or lower: move what both need down to a layer the importer reaches, or declare the small interface it needs where it is used`},
		{"a floor imports the ui", edge{from: "policy/safetensors", to: "ui"},
			`layer "floors" (policy) imports layer "assembly" (ui), which is above it; a package imports only its own layer or lower: move what both need down to a layer the importer reaches, or declare the small interface it needs where it is used`},
		{"a floor imports the driver", edge{from: "sandbox", to: "pipeline/driver"},
			`layer "floors" (sandbox) imports layer "loop" (pipeline/driver), which is above it; a package imports only its own layer or lower: move what both need down to a layer the importer reaches, or declare the small interface it needs where it is used`},
		{"a test helper imports the command", edge{from: "policy/vllmserver/vllmtest", to: "cli"},
			`layer "floors" (policy) imports layer "command" (cli), which is above it; a package imports only its own layer or lower: move what both need down to a layer the importer reaches, or declare the small interface it needs where it is used`},
		{"a floor's test imports the command", edge{from: "policy/openai", to: "cli", test: true},
			`layer "floors" (policy) imports layer "command" (cli), which is above it; a package imports only its own layer or lower: move what both need down to a layer the importer reaches, or declare the small interface it needs where it is used; a test may also use another unit of its own layer, and the fixtures pipeline/standin, cli/kinds, environments/arith and environments/guess`},
		{"the config's test imports a stage", edge{from: "pipeline/config", to: "rollouts", test: true},
			`layer "config" (pipeline/config) imports layer "loop" (rollouts), which is above it; a package imports only its own layer or lower: move what both need down to a layer the importer reaches, or declare the small interface it needs where it is used; a test may also use another unit of its own layer, and the fixtures pipeline/standin, cli/kinds, environments/arith and environments/guess`},
		{"a stage imports the ui", edge{from: "reports", to: "ui"},
			`layer "loop" (reports) imports layer "assembly" (ui), which is above it; a package imports only its own layer or lower: move what both need down to a layer the importer reaches, or declare the small interface it needs where it is used`},
		{"the registry imports the command", edge{from: "cli/kinds", to: "cli"},
			`layer "assembly" (cli/kinds) imports layer "command" (cli), which is above it; a package imports only its own layer or lower: move what both need down to a layer the importer reaches, or declare the small interface it needs where it is used`},
		{"a stage imports another", edge{from: "evaluators", to: "rewards"},
			`evaluators and rewards sit side by side in layer "loop" and import none of each other: move what both need to a lower layer both import`},
		{"the driver imports a stage", edge{from: "pipeline/driver", to: "rollouts"},
			`pipeline/driver and rollouts sit side by side in layer "loop" and import none of each other: move what both need to a lower layer both import`},
		{"a floor imports another", edge{from: "trackers", to: "policy"},
			`trackers and policy sit side by side in layer "floors" and import none of each other: move what both need to a lower layer both import`},
		{"the driver links Temporal", edge{from: "pipeline/driver", to: "pipeline/temporalrun"},
			`pipeline/temporalrun links go.temporal.io, which only pipeline/temporalrun and the layers from "command" up may link: below the command, an executor is a pipeline.Executor value the command builds`},
		{"the driver's test links Temporal", edge{from: "pipeline/driver", to: "pipeline/temporalrun", test: true},
			`pipeline/temporalrun links go.temporal.io, which only pipeline/temporalrun and the layers from "command" up may link: below the command, an executor is a pipeline.Executor value the command builds`},
		{"the engine imports Temporal's SDK", edge{from: "pipeline", to: "go.temporal.io/sdk/client"},
			`go.temporal.io/sdk/client links go.temporal.io, which only pipeline/temporalrun and the layers from "command" up may link: below the command, an executor is a pipeline.Executor value the command builds`},
		{"the registry links Temporal", edge{from: "cli/kinds", to: "go.temporal.io/sdk/worker"},
			`go.temporal.io/sdk/worker links go.temporal.io, which only pipeline/temporalrun and the layers from "command" up may link: below the command, an executor is a pipeline.Executor value the command builds`},
		{"a stage links Temporal through another module", edge{from: "rollouts", to: "example.com/wraps/temporal"},
			`example.com/wraps/temporal links go.temporal.io, which only pipeline/temporalrun and the layers from "command" up may link: below the command, an executor is a pipeline.Executor value the command builds`},
	} {
		if got := r.check(tc.e); got != tc.want {
			t.Errorf("%s: %s\n got: %q\nwant: %q", tc.name, tc.e, got, tc.want)
		}
	}
	for _, e := range []edge{
		{from: "policy/embedded", to: "policy/openai"},                  // one unit
		{from: "pipeline/driver", to: "pipeline/config"},                // a lower layer
		{from: "pipeline/temporalrun", to: "pipeline"},                  // the engine's own unit
		{from: "pipeline/temporalrun", to: "go.temporal.io/sdk/client"}, // Temporal's one user
		{from: "pipeline/temporalrun/temporaltests", to: "go.temporal.io/sdk/testsuite", test: true},
		{from: "cli", to: "pipeline/temporalrun"},                      // the command wires the executor
		{from: "cli", to: "ui"},                                        // the command assembles
		{from: "examples/exampletest", to: "cli"},                      // examples drive the command
		{from: "pipeline", to: "pipeline/standin", test: true},         // a fixture
		{from: "pipeline/config", to: "cli/kinds", test: true},         // a fixture
		{from: "trainers/embedded", to: "rollouts", test: true},        // a test's neighbour
		{from: "policy/vllmserver/vllmtest", to: "policy/embedded"},    // one unit
		{from: "pipeline/driver", to: "pipeline/driver", test: true},   // an external test of its package
		{from: "rollouts", to: "github.com/apache/arrow-go/v18/arrow"}, // outside the module
	} {
		if got := r.check(e); got != "" {
			t.Errorf("%s is refused: %s", e, got)
		}
	}
}

// TestViolationsOfAListing runs the whole check on a made-up listing: a
// package in no layer is named, and a package that links Temporal where
// it may not is reported at the edge that brings Temporal in, not at
// every importer above it.
func TestViolationsOfAListing(t *testing.T) {
	r := rules{temporal: map[string]bool{"sandbox": true, "environments/agent": true, "rewards/runners": true}}
	pkgs := []pkg{
		{path: "sandbox", imports: []string{"internal/scratch", "go.temporal.io/sdk/client"}},
		{path: "environments/agent", imports: []string{"environments", "sandbox"}, testImport: []string{"sandbox"}},
		{path: "rewards/runners", imports: []string{"sandbox"}},
		{path: "scripts/gen", imports: []string{"artifacts"}},
	}
	bad, unplaced := violations(pkgs, r)
	want := map[string]string{
		"sandbox → go.temporal.io/sdk/client": `go.temporal.io/sdk/client links go.temporal.io, which only pipeline/temporalrun and the layers from "command" up may link: below the command, an executor is a pipeline.Executor value the command builds`,
	}
	if !maps.Equal(bad, want) {
		t.Errorf("violations: %q, want %q", bad, want)
	}
	if !slices.Equal(unplaced, []string{"scripts/gen"}) {
		t.Errorf("in no layer: %q, want [scripts/gen]", unplaced)
	}
}
