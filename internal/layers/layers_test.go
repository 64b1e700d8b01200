package layers

import (
	"bytes"
	"os/exec"
	"sort"
	"strings"
	"testing"
)

const module = "github.com/rlpipe/rlpipe/"

// stages are the stages' folders below the module: a package belongs to
// the stage whose folder holds it.
var stages = []string{"rollouts", "rewards", "trainers", "evaluators", "reports", "environments"}

// debt are the rule-breaking edges still in the tree, from → to.
// It is empty: every edge that broke the rule is gone. A new one is a
// design question (which floor should hold the shared noun?), not a line
// to add here.
var debt = map[string]string{}

// stageOf is the stage a package belongs to, or "".
func stageOf(pkg string) string {
	for _, s := range stages {
		if pkg == s || strings.HasPrefix(pkg, s+"/") {
			return s
		}
	}
	return ""
}

// composition may import anything.
func composition(pkg string) bool {
	return pkg == "cli" || strings.HasPrefix(pkg, "cli/") || strings.HasPrefix(pkg, "examples/")
}

func TestNoStageImportsAnother(t *testing.T) {
	out, err := exec.Command("go", "list", "-f", `{{.ImportPath}}{{range .Imports}} {{.}}{{end}}`, module+"...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	found := map[string]bool{}
	for _, line := range strings.Split(string(bytes.TrimSpace(out)), "\n") {
		f := strings.Fields(line)
		from := strings.TrimPrefix(f[0], module)
		if composition(from) || strings.HasSuffix(from, "_test") {
			continue
		}
		for _, imp := range f[1:] {
			if !strings.HasPrefix(imp, module) {
				continue
			}
			to := strings.TrimPrefix(imp, module)
			fs, ts := stageOf(from), stageOf(to)
			var bad bool
			switch {
			case ts == "":
				// floors may be imported by anyone
			case strings.HasPrefix(from, "pipeline/standin"):
				bad = true
			case fs == "":
				bad = true // a floor (or the config) importing a stage
			case fs != ts:
				bad = true // a stage reaching sideways
			}
			if from == "pipeline/config" && to == "pipeline/standin" {
				bad = true // the stand-ins are a stage kind like any other
			}
			if bad {
				found[from+" → "+to] = true
			}
		}
	}
	var fresh, gone []string
	for e := range found {
		if _, ok := debt[e]; !ok {
			fresh = append(fresh, e)
		}
	}
	for e := range debt {
		if !found[e] {
			gone = append(gone, e)
		}
	}
	sort.Strings(fresh)
	sort.Strings(gone)
	for _, e := range fresh {
		t.Errorf("%s: a package imports another stage's package; move the shared noun to a floor both can import (docs/ARCHITECTURE.md, Layers)", e)
	}
	for _, e := range gone {
		t.Errorf("%s: this edge is gone; remove it from the debt table", e)
	}
}
