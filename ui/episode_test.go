package ui_test

import (
	"context"
	"errors"
	"net/http"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/rlpipe/rlpipe/artifacts"
	"github.com/rlpipe/rlpipe/artifacts/runs"
	"github.com/rlpipe/rlpipe/artifacts/tables"
	"github.com/rlpipe/rlpipe/policy/hftokenizer"
	"github.com/rlpipe/rlpipe/policy/tiny"
	"github.com/rlpipe/rlpipe/ui"
)

// episodesPath holds two episodes on main, each in a row group of its
// own: a two-turn one with its exact sequence (prompt 5 6 | reply 7 2 |
// observation 8 | reply 9 2), and one without a sequence.
const episodesPath = "data/episodes.parquet"

func putEpisodes(t testing.TB, st artifacts.Store) {
	t.Helper()
	calls := `[{"tool":"bash","command":"ls"}]`
	fnCalls := `[{"id":"call_1_0","type":"function","function":{"name":"bash","arguments":"{\"cmd\":\"ls -l\"}"}},{"id":"call_1_1","type":"function","function":{"name":"submit","arguments":"{}"}}]`
	outcome := `{"reward":1,"info":{"solved":true}}`
	rows := []tables.Trajectory{
		{PromptID: "p1", SampleIndex: 0, GroupID: "g", Completion: "9", Status: tables.StatusOK, PolicyVersion: "m",
			Turns:    []tables.Turn{{Role: "user", Content: "12+3="}, {Role: "assistant", Content: "15", ToolCalls: &calls}, {Role: "user", Content: "15+1="}, {Role: "assistant", Content: "16"}},
			TokenIDs: []int32{7, 2, 9, 2}, Sequence: []int32{5, 6, 7, 2, 8, 9, 2}, Trainable: []int32{0, 0, 1, 1, 0, 1, 1}, EnvOutcome: &outcome},
		{PromptID: "p1", SampleIndex: 1, GroupID: "g", Completion: "x", Status: tables.StatusTruncated, PolicyVersion: "m",
			Turns: []tables.Turn{{Role: "user", Content: "12+3="}, {Role: "assistant", Content: "x"},
				{Role: "user", Content: "List the files."}, {Role: "assistant", Content: "I will look.", ToolCalls: &fnCalls}, {Role: "tool", Content: "a.txt"}}},
	}
	// A row group a row: an episode is read from its own.
	commitTable(t, st, episodesPath, tables.Trajectories, rows, &tables.WriteOptions{RowGroupRows: 1, BatchRows: 1}, "two episodes")
}

// /api/episode shapes a trajectories row as an episode: its turns, each
// reply with the number of tokens it was sampled as, and the sequence cut
// where the trainable mask changes.
func TestEpisodeAPI(t *testing.T) {
	st := newRunStore(t, 1)
	putEpisodes(t, st)
	h := newHandler(t, st, nil)
	var e ui.Episode
	if code := get(t, h, "/api/episode?ref=main&path="+episodesPath+"&row=0", &e); code != http.StatusOK {
		t.Fatalf("status %d", code)
	}
	two := func(n int) *int { return &n }
	wantTurns := []ui.EpisodeTurn{{Role: "user", Content: "12+3="}, {Role: "assistant", Content: "15", ToolCalls: e.Turns[1].ToolCalls,
		Calls: []ui.EpisodeCall{{Name: "bash", Arguments: "ls"}}, Tokens: two(2)},
		{Role: "user", Content: "15+1="}, {Role: "assistant", Content: "16", Tokens: two(2)}}
	wantSegs := []ui.EpisodeSegment{{IDs: []int32{5, 6}}, {Trainable: true, IDs: []int32{7, 2}}, {IDs: []int32{8}}, {Trainable: true, IDs: []int32{9, 2}}}
	if !e.Exact || e.Tokens != 7 || e.Trainable != 4 || e.Rows != 2 || !reflect.DeepEqual(e.Turns, wantTurns) || !reflect.DeepEqual(e.Segments, wantSegs) ||
		string(e.Outcome) != `{"reward":1,"info":{"solved":true}}` || e.Turns[1].ToolCalls == nil {
		t.Errorf("episode %+v", e)
	}
	var loose ui.Episode
	get(t, h, "/api/episode?ref=main&path="+episodesPath+"&row=1", &loose)
	if loose.Exact || loose.Tokens != 0 || len(loose.Segments) != 0 || loose.Turns[1].Tokens != nil || loose.Status != tables.StatusTruncated || string(loose.Outcome) != "null" {
		t.Errorf("an episode without a sequence: %+v", loose)
	}
	// Function calls read as name and arguments; the tool's answer is a
	// turn of its own.
	wantCalls := []ui.EpisodeCall{{Name: "bash", Arguments: `{"cmd":"ls -l"}`}, {Name: "submit", Arguments: "{}"}}
	if tu := loose.Turns[3]; !reflect.DeepEqual(tu.Calls, wantCalls) || loose.Turns[4].Role != "tool" || loose.Turns[4].Content != "a.txt" {
		t.Errorf("tool calls %+v, then %+v", tu.Calls, loose.Turns[4])
	}
	if tu := loose.Turns[1]; tu.Calls != nil {
		t.Errorf("a turn without calls has %+v", tu.Calls)
	}
	for _, c := range []struct {
		path string
		code int
		want string
	}{
		{"/api/episode?ref=main&path=" + episodesPath + "&row=2", http.StatusNotFound, "has 2 rows; there is no row 2"},
		{"/api/episode?ref=main&path=data/wide.parquet", http.StatusBadRequest, "main:data/wide.parquet is not a trajectories table"},
		{"/api/episode?ref=main&path=" + episodesPath + "&row=-1", http.StatusBadRequest, `row="-1"`},
		{"/api/episode?path=" + episodesPath, http.StatusBadRequest, "missing ref"},
	} {
		var ae struct{ Error string }
		if code := get(t, h, c.path, &ae); code != c.code || !strings.Contains(ae.Error, c.want) {
			t.Errorf("GET %s: %d %q, want %d and %q", c.path, code, ae.Error, c.code, c.want)
		}
	}
}

// episodePage is what TestBrowserEpisode reads off the episode page.
type episodePage struct {
	Turns    []string
	Badges   []string
	Trained  []string
	Given    []string
	Tokens   string
	Headline string
}

// The episode page in a browser: reached from the trajectories table's row
// link, it shows every turn, marks each reply trained with its token count,
// and draws the sequence with the trainable tokens apart.
func TestBrowserEpisode(t *testing.T) {
	chromium := findChromium(t)
	st := newRunStore(t, 1)
	putEpisodes(t, st)
	putSpelledEpisode(t, st)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	addr := serveUI(ctx, t, st, time.Hour)
	page := openPage(ctx, t, chromium)
	page.navigate(ctx, t, "http://"+addr+"/#/table/main/"+episodesPath)
	var link string
	page.waitFor(ctx, t, &link, `(() => { const a = document.querySelector('a.episode-link'); return a ? a.getAttribute('href') : null; })()`)
	page.navigate(ctx, t, "http://"+addr+"/"+link)
	var got episodePage
	page.waitFor(ctx, t, &got, `document.querySelector('.episode .tokens') ? {
		turns: [...document.querySelectorAll('.turn pre.content')].map((e) => e.textContent),
		badges: [...document.querySelectorAll('.turn .badge')].map((e) => e.textContent),
		trained: [...document.querySelectorAll('.tokens .seg.trainable')].map((e) => e.textContent),
		given: [...document.querySelectorAll('.tokens .seg.given')].map((e) => e.textContent),
		tokens: [...document.querySelectorAll('.episode dd')][3].textContent,
		headline: document.querySelector('.episode h1').textContent,
	} : null`)
	want := episodePage{[]string{"12+3=", "15", "15+1=", "16"}, []string{"given", "trained · 2 tokens", "given", "trained · 2 tokens"},
		[]string{"7 2", "9 2"}, []string{"5 6", "8"}, "7, of which 4 trainable (the replies) and 3 given", "p1 · episode 0"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("episode page:\n got %+v\nwant %+v", got, want)
	}
	// The next episode's tool calls, as name and arguments, and the
	// tool's answer as a turn.
	page.navigate(ctx, t, "http://"+addr+"/#/episode/main/"+episodesPath+"?row=1")
	var calls struct{ Calls, Tool []string }
	page.waitFor(ctx, t, &calls, `document.querySelector('.turn.tool') ? {
		calls: [...document.querySelectorAll('.turn pre.call')].map((e) => e.textContent),
		tool: [...document.querySelectorAll('.turn.tool pre.content')].map((e) => e.textContent),
	} : null`)
	if want := []string{`bash {"cmd":"ls -l"}`, "submit {}"}; !reflect.DeepEqual(calls.Calls, want) || !reflect.DeepEqual(calls.Tool, []string{"a.txt"}) {
		t.Errorf("tool calls on the page %q, tool turns %q; want %q, [a.txt]", calls.Calls, calls.Tool, want)
	}

	// An episode of the embedded model shows its tokens' text, each
	// token its own span with its id as the tooltip.
	page.navigate(ctx, t, "http://"+addr+"/#/episode/main/"+spelledPath+"?row=0")
	var spelled struct {
		Trained, Given, Tokens, Titles []string
	}
	page.waitFor(ctx, t, &spelled, `document.querySelector('.tokens.spelled') ? {
		trained: [...document.querySelectorAll('.tokens .seg.trainable')].map((e) => e.textContent),
		given: [...document.querySelectorAll('.tokens .seg.given')].map((e) => e.textContent),
		tokens: [...document.querySelectorAll('.tokens .seg.trainable .tok')].map((e) => e.textContent),
		titles: [...document.querySelectorAll('.tokens .seg.trainable .tok')].map((e) => e.title),
	} : null`)
	if !reflect.DeepEqual(spelled.Trained, []string{"15<eos>"}) || !reflect.DeepEqual(spelled.Given, []string{"<bos>12+3="}) ||
		!reflect.DeepEqual(spelled.Tokens, []string{"1", "5", "<eos>"}) || !reflect.DeepEqual(spelled.Titles, []string{"token id 4", "token id 8", "token id 2"}) {
		t.Errorf("the spelled episode shows %+v", spelled)
	}
	keepScreenshot(ctx, t, page, "episode-spelled.png")
}

// spelledPath holds an episode of the embedded model: its policy version
// names a base model whose tokenizer the UI has, so the episode's tokens
// are spelled.
const spelledPath = "data/spelled.parquet"

func putSpelledEpisode(t testing.TB, st artifacts.Store) {
	t.Helper()
	m, err := tiny.Embedded()
	if err != nil {
		t.Fatal(err)
	}
	ids := func(s string) []int32 {
		out, err := m.Tokenize(s)
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	prompt, reply := append([]int32{tiny.BOS}, ids("12+3=")...), append(ids("15"), tiny.EOS)
	seq := append(append([]int32{}, prompt...), reply...)
	mask := make([]int32, len(seq))
	for i := len(prompt); i < len(seq); i++ {
		mask[i] = 1
	}
	rows := []tables.Trajectory{{PromptID: "p1", GroupID: "g", Completion: "15", Status: tables.StatusOK, PolicyVersion: m.Version() + "+iteration-000001",
		Turns: []tables.Turn{{Role: "user", Content: "12+3="}, {Role: "assistant", Content: "15"}}, TokenIDs: reply, Sequence: seq, Trainable: mask}}
	commitTable(t, st, spelledPath, tables.Trajectories, rows, nil, "an episode of the embedded model")
}

// An episode whose policy is an embedded model (an adapter of it too) has
// its tokens spelled by that model's tokenizer; one of a policy the UI
// has no tokenizer for keeps its ids only.
func TestEpisodeSpelled(t *testing.T) {
	st := newRunStore(t, 1)
	putEpisodes(t, st)
	putSpelledEpisode(t, st)
	h := newHandler(t, st, nil)
	var e ui.Episode
	if code := get(t, h, "/api/episode?ref=main&path="+spelledPath+"&row=0", &e); code != http.StatusOK {
		t.Fatalf("status %d", code)
	}
	var text [][]string
	for _, sg := range e.Segments {
		text = append(text, sg.Text)
	}
	if want := [][]string{{"<bos>", "1", "2", "+", "3", "="}, {"1", "5", "<eos>"}}; !e.Spelled || !reflect.DeepEqual(text, want) {
		t.Errorf("spelled %v, segments' text %q; want %q", e.Spelled, text, want)
	}
	var other ui.Episode
	get(t, h, "/api/episode?ref=main&path="+episodesPath+"&row=0", &other)
	if other.Spelled || other.Segments[0].Text != nil {
		t.Errorf("policy %q has no tokenizer here, yet the episode is spelled: %+v", other.PolicyVersion, other.Segments)
	}
}

// An episode of a policy the UI ships no tokenizer for (an openai
// policy) is spelled by the one Options.Tokenizer finds from the run's
// recorded config; an id beyond its vocabulary shows as the id, and a
// tokenizer that cannot be read leaves the ids with the reason.
func TestEpisodeSpelledByTokenizer(t *testing.T) {
	tok, err := hftokenizer.Parse([]byte(`{"model":{"type":"BPE","vocab":{"a":0,"b":1,"ĠThe":5,"Ġsum":6,"Ġis":7,"Ċ":2}},"decoder":{"type":"ByteLevel"}}`))
	if err != nil {
		t.Fatal(err)
	}
	const recorded = "policy:\n  kind: openai\n  tokenizer: qwen/tokenizer.json\n"
	for _, tc := range []struct {
		name      string
		speller   ui.Speller
		err       error
		wantText  [][]string
		wantError string
	}{
		{"tokenizer", tok, nil, [][]string{{" The", " sum"}, {" is", "\n"}, {"<id 8>"}, {"<id 9>", "\n"}}, ""},
		{"no tokenizer", nil, nil, [][]string{nil, nil, nil, nil}, ""},
		{"unreadable tokenizer", nil, errors.New("policy.tokenizer of run/config.yaml: read tokenizer qwen/tokenizer.json: no such file or directory: tokenizer not found"),
			[][]string{nil, nil, nil, nil}, "policy.tokenizer of run/config.yaml: read tokenizer qwen/tokenizer.json: no such file or directory: tokenizer not found"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st := newRunStore(t, 1)
			putEpisodes(t, st)
			ctx := context.Background()
			if _, err := st.PutObject(ctx, "main", runs.ConfigPath, strings.NewReader(recorded), nil); err != nil {
				t.Fatal(err)
			}
			if _, err := st.Commit(ctx, "main", "the run's config", nil); err != nil {
				t.Fatal(err)
			}
			var got []string
			h := newHandler(t, st, &ui.Options{Tokenizer: func(raw []byte) (ui.Speller, error) {
				got = append(got, string(raw))
				return tc.speller, tc.err
			}})
			var e ui.Episode
			for range 2 {
				if code := get(t, h, "/api/episode?ref=main&path="+episodesPath+"&row=0", &e); code != http.StatusOK {
					t.Fatalf("status %d", code)
				}
			}
			var text [][]string
			for _, sg := range e.Segments {
				text = append(text, sg.Text)
			}
			if e.Spelled != (tc.speller != nil) || !reflect.DeepEqual(text, tc.wantText) || e.SpellError != tc.wantError {
				t.Errorf("spelled %v, text %q, spell error %q; want text %q, error %q", e.Spelled, text, e.SpellError, tc.wantText, tc.wantError)
			}
			// Asked with the recorded config; a found speller is kept.
			wantCalls := []string{recorded, recorded}
			if tc.err == nil {
				wantCalls = wantCalls[:1]
			}
			if !reflect.DeepEqual(got, wantCalls) {
				t.Errorf("Tokenizer called with %q, want %q", got, wantCalls)
			}
		})
	}
}
