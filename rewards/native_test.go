package rewards

import (
	"bytes"
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"

	"github.com/rlpipe/rlpipe/artifacts/tables"
)

// interpretOnly compiles without native plans.
func interpretOnly() Option { return func(c *compileConfig) { c.interpretOnly = true } }

// exprGen writes random reward expressions of the idioms native plans
// recognise, mixed with some they do not (which CEL evaluates) and with
// values CEL refuses (int overflow, NaN in an ordering, division by
// zero, a missing prompt).
type exprGen struct{ r *rand.Rand }

func (g exprGen) pick(xs ...string) string { return xs[g.r.IntN(len(xs))] }

func (g exprGen) str(d int) string {
	if d <= 0 || g.r.IntN(3) == 0 {
		return g.pick(`completion`, `answer`, `prompt`, `prompt_id`, `status`, `finish_reason`, `group_id`,
			`policy_version`, `"####"`, `"\\boxed{"`, `"12"`, `""`, `"1,234"`, `"nan"`)
	}
	switch g.r.IntN(6) {
	case 0:
		return "extract_answer(" + g.str(d-1) + ")"
	case 1:
		return "extract_boxed(" + g.str(d-1) + ")"
	case 2:
		return "last_number(" + g.str(d-1) + ")"
	case 3:
		return "(" + g.bool(d-1) + " ? " + g.str(d-1) + " : " + g.str(d-1) + ")"
	case 4:
		return g.str(d-1) + " + " + g.str(d-1) // not native
	}
	return g.str(d-1) + ".lowerAscii()" // not native
}

func (g exprGen) int(d int) string {
	if d <= 0 || g.r.IntN(3) == 0 {
		return g.pick(`num_tokens`, `sample_index`, `staleness`, `0`, `1`, `150`, `-7`,
			`9223372036854775807`, `(-9223372036854775807 - 1)`)
	}
	a, b := g.int(d-1), g.int(d-1)
	switch n := g.r.IntN(8); n {
	case 0, 1, 2:
		return arith(n, a, b)
	case 3:
		return "-(" + a + ")"
	case 4:
		return "(" + g.bool(d-1) + " ? " + a + " : " + b + ")"
	case 5:
		return arith(3, a, b) // not native
	case 6:
		return "size(" + g.str(d-1) + ")" // not native
	}
	return "(" + a + " * 4611686018427387904)"
}

func (g exprGen) dbl(d int) string {
	if d <= 0 || g.r.IntN(3) == 0 {
		return g.pick(`1.0`, `0.0`, `-0.001`, `0.2`, `1e308`, `-1e308`, `2.5`, `-0.0`, `(0.0 / 0.0)`, `(1e308 * 10.0)`)
	}
	a, b := g.dbl(d-1), g.dbl(d-1)
	switch n := g.r.IntN(10); n {
	case 0, 1, 2, 3:
		return arith(n, a, b)
	case 4:
		return "-(" + a + ")"
	case 5:
		return "double(" + g.int(d-1) + ")"
	case 6:
		return "(" + g.bool(d-1) + " ? " + a + " : " + b + ")"
	case 7:
		return "parse_number(" + g.str(d-1) + ")" // not native
	case 8:
		return "(" + a + " * double(" + g.int(d-1) + " - 150))"
	}
	return "(0.0 / 0.0)"
}

// arith is (a op b) for op the n-th of +, -, * and /.
func arith(n int, a, b string) string { return "(" + a + " " + "+-*/"[n:n+1] + " " + b + ")" }

// oneOf is what one of gens, picked at random, makes at depth d.
func (g exprGen) oneOf(d int, gens ...func(int) string) string { return gens[g.r.IntN(len(gens))](d) }

func (g exprGen) num(d int) string { return g.oneOf(d, g.str, g.int, g.dbl) }

func (g exprGen) bool(d int) string {
	if d <= 0 || g.r.IntN(4) == 0 {
		return g.pick(`true`, `false`, `completion.contains("####")`, `num_tokens > 150`)
	}
	cmp := g.pick(" < ", " <= ", " > ", " >= ", " == ", " != ")
	switch g.r.IntN(14) {
	case 0:
		return g.str(d-1) + ".contains(" + g.str(d-1) + ")"
	case 1:
		return g.str(d-1) + ".startsWith(" + g.str(d-1) + ")"
	case 2:
		return g.str(d-1) + ".endsWith(" + g.str(d-1) + ")"
	case 3:
		return "num_equal(" + g.num(d-1) + ", " + g.num(d-1) + ", " + g.dbl(d-1) + ")"
	case 4:
		return "num_equal(" + g.num(d-1) + ", " + g.num(d-1) + ")"
	case 5:
		return "is_number(" + g.str(d-1) + ")"
	case 6:
		return "(" + g.int(d-1) + cmp + g.int(d-1) + ")"
	case 7:
		return "(" + g.dbl(d-1) + cmp + g.dbl(d-1) + ")"
	case 8:
		return "(" + g.str(d-1) + cmp + g.str(d-1) + ")"
	case 9:
		return "(" + g.bool(d-1) + g.pick(" && ", " || ", " == ", " != ") + g.bool(d-1) + ")"
	case 10:
		return "!(" + g.bool(d-1) + ")"
	case 11:
		return "(" + g.bool(d-1) + " ? " + g.bool(d-1) + " : " + g.bool(d-1) + ")"
	case 12:
		return "(" + g.int(d-1) + " < " + g.dbl(d-1) + ")" // not native: mixed types
	}
	return g.str(d-1) + `.matches("[0-9]+")` // not native
}

func (g exprGen) component(d int) string { return g.oneOf(d, g.int, g.bool, g.dbl) }

// nativeRows are rows with the values that test the edges: numbers with
// separators, boxes, "####" lines, no answer, "nan", the extremes of
// num_tokens, prompts missing from the prompts table, skipped rows.
func nativeRows(r *rand.Rand, n int) ([]tables.Trajectory, []tables.Prompt) {
	texts := []string{"12", "1,234", "12.5", "", "abc", "nan", "NaN", "1e400", "-0", "0.25", "1,234.5", "∞"}
	var prompts []tables.Prompt
	for p := 0; p < n/4; p++ {
		if p%7 == 3 {
			continue // rows of this prompt have none
		}
		prompts = append(prompts, tables.Prompt{PromptID: "p" + strconv.Itoa(p), Prompt: texts[r.IntN(len(texts))] + " ?",
			Answer: texts[r.IntN(len(texts))]})
	}
	tokens := []int32{0, 1, 150, 151, 220, -5, math.MaxInt32, math.MinInt32}
	var rows []tables.Trajectory
	for i := 0; i < n; i++ {
		a := texts[r.IntN(len(texts))]
		var c string
		switch r.IntN(6) {
		case 0:
			c = "so it is\n#### " + a
		case 1:
			c = `thus $\boxed{` + a + `}$.`
		case 2:
			c = "the last is " + a + " and then 7"
		case 3:
			c = "#### " + a + "\nand \\boxed{" + texts[r.IntN(len(texts))] + "}"
		case 4:
			c = a
		default:
			c = "words only"
		}
		t := tables.Trajectory{PromptID: "p" + strconv.Itoa(i/4), SampleIndex: int32(i % 4), GroupID: "g",
			Completion: c, NumTokens: tokens[r.IntN(len(tokens))], Staleness: int32(r.IntN(3)),
			FinishReason: "stop", Status: tables.StatusOK, PolicyVersion: "v1"}
		if r.IntN(20) == 0 {
			msg := "timed out"
			t.Status, t.Error = tables.StatusTimeout, &msg
		}
		rows = append(rows, t)
	}
	return rows, prompts
}

// TestNativeAgrees: for random specs and rows, a native plan's value is
// the interpreter's, bit for bit, wherever the plan gives one; and
// scoring with native plans writes the same rewards file, byte for byte,
// and the same rewards row by row (Score) as scoring with the
// interpreter alone.
func TestNativeAgrees(t *testing.T) {
	r := rand.New(rand.NewPCG(19, 1))
	rows, prompts := nativeRows(r, 240)
	idx, err := NewPrompts(prompts)
	if err != nil {
		t.Fatal(err)
	}
	byID := map[string]tables.Prompt{}
	for _, p := range prompts {
		byID[p.PromptID] = p
	}
	in := trajectories(t, rows)
	g := exprGen{r}
	// The first specs start with these edges, the others are random.
	edges := []string{
		`num_equal(extract_answer(completion), answer, 1e-6) ? 1.0 : 0.0`,
		`completion.contains("####") || completion.contains("\\boxed{") ? 1.0 : 0.0`,
		`num_tokens > 150 ? -0.001 * double(num_tokens - 150) : 0.0`,
		`num_equal(1e308 * 10.0, 1e308 * 10.0)`,
		`num_equal(0.0 / 0.0, 0.0 / 0.0)`,
		`num_equal(num_tokens, 150.0) || num_equal(answer, 12)`,
		`(0.0 / 0.0) < 1.0 || 1.0 >= (0.0 / 0.0)`,
		`num_tokens * 4611686018427387904`,
		`-(num_tokens - 9223372036854775807 - 1)`,
		`double(num_tokens) * 1e308 * 10.0`,
		`prompt.endsWith("?") && answer != ""`,
	}
	specs, planned, natives, fallbacks, tries := 0, 0, 0, 0, 0
	for specs < 150 {
		var b strings.Builder
		b.WriteString("components:\n")
		for j := 0; j < 3; j++ {
			expr := g.component(1 + r.IntN(4))
			if j == 0 && specs < len(edges) {
				expr = edges[specs]
			}
			fmt.Fprintf(&b, "  - name: c%d\n    expr: %s\n    weight: %s\n", j,
				strconv.Quote(expr), g.pick("1.0", "0.2", "-0.5"))
		}
		spec, err := ParseSpec("spec.yaml", []byte(b.String()))
		if err != nil {
			t.Fatal(err)
		}
		fast, err := Compile(spec)
		if err != nil {
			// A random expression the checker refuses: draw again.
			if tries++; tries > 100*150 {
				t.Fatal(err)
			}
			continue
		}
		slow, err := Compile(spec, interpretOnly())
		if err != nil {
			t.Fatal(err)
		}
		specs++
		ctx := context.Background()
		for i, row := range rows {
			p, ok := byID[row.PromptID]
			in := Row{Trajectory: row, Prompt: p, HasPrompt: ok}
			want, err := slow.Score(ctx, in, nil)
			if err != nil {
				t.Fatal(err)
			}
			got, err := fast.Score(ctx, in, nil)
			if err != nil {
				t.Fatal(err)
			}
			if !sameReward(got, want) {
				t.Fatalf("spec\n%s\nrow %d (%+v):\nnative %+v\ninterpreter %+v", b.String(), i, row, got, want)
			}
			// Each plan alone: a value only where the interpreter gives
			// the same one.
			src := &rowSource{row: &in}
			if ok {
				src.prompt = newPromptEntry(p)
			}
			for _, c := range fast.comps {
				if c.native == nil {
					continue
				}
				var a activation
				a.at(src, 0)
				v, ok := c.native(&a)
				if !ok {
					fallbacks++
					continue
				}
				natives++
				a.at(src, 0)
				out, _, err := c.prg.Eval(&a)
				if err != nil {
					t.Fatalf("%s on row %d: native %v, interpreter error %v", c.name, i, v, err)
				}
				if f, bad := toFloat(out); bad != "" || math.Float64bits(f) != math.Float64bits(v) {
					t.Fatalf("%s on row %d: native %v, interpreter %v", c.name, i, v, out)
				}
			}
		}
		for _, c := range fast.comps {
			if c.native != nil {
				planned++
			}
		}
		if specs%5 == 0 {
			files := [2][]byte{}
			for k, p := range []*Program{fast, slow} {
				var out bytes.Buffer
				if _, err := p.ScoreFile(ctx, &out, bytes.NewReader(in), int64(len(in)), &ScoreOptions{Prompts: idx}); err != nil {
					t.Fatal(err)
				}
				files[k] = out.Bytes()
			}
			if !bytes.Equal(files[0], files[1]) {
				t.Fatalf("spec\n%s\nrewards files differ", b.String())
			}
		}
	}
	t.Logf("%d specs, %d of %d components planned natively; %d native values, %d left to CEL", specs, planned, 3*specs, natives, fallbacks)
	if planned < specs || natives < 100*specs || fallbacks == 0 {
		t.Errorf("the test exercises too little: %d planned, %d native values, %d fallbacks", planned, natives, fallbacks)
	}
}

// sameReward: equal rows, floats compared bit for bit.
func sameReward(a, b tables.Reward) bool {
	bits := math.Float64bits
	if a.PromptID != b.PromptID || a.SampleIndex != b.SampleIndex || a.Status != b.Status ||
		bits(a.Total) != bits(b.Total) || len(a.Components) != len(b.Components) ||
		(a.Error == nil) != (b.Error == nil) || a.Error != nil && *a.Error != *b.Error {
		return false
	}
	for k, v := range a.Components {
		w, ok := b.Components[k]
		if !ok || bits(v) != bits(w) {
			return false
		}
	}
	return true
}

// TestNativePlans: the idioms of the rescoring benchmark's spec have a
// native plan; what is outside the list has none.
func TestNativePlans(t *testing.T) {
	for _, c := range []struct {
		expr   string
		native bool
	}{
		{`num_equal(extract_answer(completion), answer, 1e-6) ? 1.0 : 0.0`, true},
		{`completion.contains("####") || completion.contains("\\boxed{") ? 1.0 : 0.0`, true},
		{`num_tokens > 150 ? -0.001 * double(num_tokens - 150) : 0.0`, true},
		{`is_number(last_number(completion))`, true},
		{`num_tokens * 2 - staleness`, true},
		{`size(completion) > 10 ? 1.0 : 0.0`, false},
		{`parse_number(answer)`, false},
		{`regex_find(completion, "[0-9]+") != "" ? 1.0 : 0.0`, false},
		{`metadata.level == 2 ? 1.0 : 0.0`, false},
		{`double(num_tokens) / 2.0 > 1.0`, true},
	} {
		t.Run(c.expr, func(t *testing.T) {
			p := mustCompile(t, "components:\n  - name: c\n    expr: "+strconv.Quote(c.expr)+"\n")
			if got := p.comps[0].native != nil; got != c.native {
				t.Errorf("native plan: %v, want %v", got, c.native)
			}
		})
	}
}
