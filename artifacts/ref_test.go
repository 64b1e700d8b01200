package artifacts_test

import (
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/rlpipe/rlpipe/artifacts"
)

func TestParseRef(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want artifacts.RefExpr
		err  error
	}{
		{"branch", "main", artifacts.RefExpr{Base: "main"}, nil},
		{"committed only", "main@", artifacts.RefExpr{Base: "main", CommittedOnly: true}, nil},
		{"dollar dropped", "main$", artifacts.RefExpr{Base: "main"}, nil},
		{"tilde default", "main~", artifacts.RefExpr{Base: "main", Ops: []artifacts.RefOp{{Kind: '~', N: 1}}}, nil},
		{"caret chain", "v1.0^2~3", artifacts.RefExpr{Base: "v1.0", Ops: []artifacts.RefOp{{Kind: '^', N: 2}, {Kind: '~', N: 3}}}, nil},
		{"caret zero", "abc123^0", artifacts.RefExpr{Base: "abc123", Ops: []artifacts.RefOp{{Kind: '^', N: 0}}}, nil},
		{"at then ops", "main@~2", artifacts.RefExpr{Base: "main", CommittedOnly: true, Ops: []artifacts.RefOp{{Kind: '~', N: 2}}}, nil},
		{"empty", "", artifacts.RefExpr{}, artifacts.ErrInvalidRef},
		{"only ops", "~1", artifacts.RefExpr{}, artifacts.ErrInvalidRef},
		{"space", "ma in", artifacts.RefExpr{}, artifacts.ErrInvalidRef},
		{"colon", "main:x", artifacts.RefExpr{}, artifacts.ErrInvalidRef},
		{"junk after ops", "main~1x", artifacts.RefExpr{}, artifacts.ErrInvalidRef},
		{"huge count", "main~99999999999999999999", artifacts.RefExpr{}, artifacts.ErrInvalidRef},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := artifacts.ParseRef(tt.in)
			if !errors.Is(err, tt.err) {
				t.Fatalf("ParseRef(%q) error = %v, want %v", tt.in, err, tt.err)
			}
			if err == nil && !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("ParseRef(%q) = %+v, want %+v", tt.in, got, tt.want)
			}
		})
	}
}

func TestValidateNames(t *testing.T) {
	for _, ok := range []string{"main", "runs-exp1", "_x", "a-b_c9"} {
		if err := artifacts.ValidateBranchName(ok); err != nil {
			t.Errorf("branch %q: %v", ok, err)
		}
	}
	for _, bad := range []string{"", "runs/x", "-a", "a b", "a.b"} {
		if err := artifacts.ValidateBranchName(bad); !errors.Is(err, artifacts.ErrInvalid) {
			t.Errorf("branch %q: got %v, want ErrInvalid", bad, err)
		}
	}
	for _, bad := range []string{"", "a..b", "a b", "x~1", "v1.", "a:b"} {
		if err := artifacts.ValidateTagName(bad); !errors.Is(err, artifacts.ErrInvalid) {
			t.Errorf("tag %q: got %v, want ErrInvalid", bad, err)
		}
	}
	for _, bad := range []string{"", "/abs", "a\x00b", strings.Repeat("x", 1025)} {
		if err := artifacts.ValidatePath(bad); !errors.Is(err, artifacts.ErrInvalid) {
			t.Errorf("path %q: got %v, want ErrInvalid", bad, err)
		}
	}
}

func TestSplitArtifact(t *testing.T) {
	ref, path, err := artifacts.SplitArtifact("runs-x~1:iterations/000001/rewards.parquet")
	if err != nil || ref != "runs-x~1" || path != "iterations/000001/rewards.parquet" {
		t.Fatalf("SplitArtifact = %q, %q, %v", ref, path, err)
	}
	if _, _, err := artifacts.SplitArtifact(":x"); !errors.Is(err, artifacts.ErrInvalidRef) {
		t.Fatalf("SplitArtifact(:x) error = %v, want ErrInvalidRef", err)
	}
}

func TestErrorHierarchy(t *testing.T) {
	chains := map[error][]error{
		artifacts.ErrBranchNotFound: {artifacts.ErrRefNotFound, artifacts.ErrNotFound},
		artifacts.ErrAmbiguousRef:   {artifacts.ErrInvalid},
		artifacts.ErrMergeConflict:  {artifacts.ErrConflict},
		artifacts.ErrDirtyBranch:    {artifacts.ErrConflict},
		artifacts.ErrObjectExists:   {artifacts.ErrExists},
	}
	for e, parents := range chains {
		for _, p := range parents {
			if !errors.Is(fmt.Errorf("ctx: %w", e), p) {
				t.Errorf("%v does not wrap %v", e, p)
			}
		}
	}
	mc := &artifacts.MergeConflictError{Source: "a", Destination: "main", Paths: []string{"x", "y"}}
	if !errors.Is(mc, artifacts.ErrMergeConflict) || !strings.Contains(mc.Error(), "x, y") {
		t.Fatalf("merge conflict error %q", mc)
	}
}

func TestProvenanceRoundTrip(t *testing.T) {
	seed := int64(42)
	p := artifacts.Provenance{
		Task: "reward", TaskVersion: "3", ConfigHash: "cfg", PolicyVersion: "adapter-1", Seed: &seed,
		Inputs:    map[string]string{"trajectories": "abc", "spec": "def"},
		CreatedAt: time.Date(2026, 12, 2, 11, 0, 0, 5, time.UTC),
	}
	m, err := p.Metadata(map[string]string{"other": "kept"})
	if err != nil {
		t.Fatal(err)
	}
	got, ok, err := artifacts.ProvenanceFromMetadata(m)
	if err != nil || !ok || !reflect.DeepEqual(got, p) || m["other"] != "kept" {
		t.Fatalf("round trip = %+v, %v, %v; metadata %v", got, ok, err, m)
	}
	if m[artifacts.MetaInputs] != `[["spec","def"],["trajectories","abc"]]` {
		t.Fatalf("inputs encoding %q is not canonical", m[artifacts.MetaInputs])
	}
	if _, ok, _ := artifacts.ProvenanceFromMetadata(map[string]string{"x": "y"}); ok {
		t.Fatal("metadata without provenance reported as having it")
	}
	if _, _, err := artifacts.ProvenanceFromMetadata(map[string]string{artifacts.MetaTask: "t", artifacts.MetaSeed: "x"}); !errors.Is(err, artifacts.ErrInvalid) {
		t.Fatalf("bad seed: %v", err)
	}
}

func FuzzParseRef(f *testing.F) {
	for _, s := range []string{"main", "main@", "v1^2~3", "abc~", "~", "a b", "x:y", "main~18446744073709551616", "é^"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		e, err := artifacts.ParseRef(s)
		if err != nil {
			if !errors.Is(err, artifacts.ErrInvalidRef) {
				t.Fatalf("ParseRef(%q): error %v is not ErrInvalidRef", s, err)
			}
			return
		}
		// The canonical form parses back to the same expression.
		again, err := artifacts.ParseRef(e.String())
		if err != nil || !reflect.DeepEqual(again, e) {
			t.Fatalf("ParseRef(%q) = %+v; its String %q parses to %+v, %v", s, e, e.String(), again, err)
		}
	})
}

func ExampleParseRef() {
	e, _ := artifacts.ParseRef("runs-exp1~2")
	fmt.Println(e.Base, string(e.Ops[0].Kind), e.Ops[0].N)
	// Output: runs-exp1 ~ 2
}
