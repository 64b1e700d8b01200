package ui

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"

	"github.com/rlpipe/rlpipe/artifacts"
	"github.com/rlpipe/rlpipe/artifacts/tables"
)

// Episode is one trajectories row as the page shows an episode: its
// turns, and its token sequence cut where the trainable mask changes, so
// that the tokens a trainer learns from (the policy's replies) stand apart
// from those it was given (the prompt, the template, the observations).
type Episode struct {
	Row           int             `json:"row"`
	Rows          int             `json:"rows"`
	PromptID      string          `json:"prompt_id"`
	SampleIndex   int32           `json:"sample_index"`
	Status        string          `json:"status"`
	Error         *string         `json:"error"`
	PolicyVersion string          `json:"policy_version"`
	Outcome       json.RawMessage `json:"env_outcome"` // the row's JSON object, or null
	Turns         []EpisodeTurn   `json:"turns"`
	// Tokens and Trainable count the sequence's tokens and its trainable
	// ones; Segments is the sequence in runs of one mask value. All are
	// zero and empty when the row has no exact sequence (Exact false):
	// nothing of it is trained on.
	Exact bool `json:"exact"`
	// Spelled says whether Segments carry their tokens' text: the UI
	// has the tokenizer of the base model PolicyVersion names (the
	// embedded models, or Options.Tokenizer's for a policy served
	// elsewhere); otherwise the page shows token ids.
	Spelled bool `json:"spelled"`
	// SpellError says why a tokenizer the run names could not be read
	// (the page shows it above the ids); empty otherwise.
	SpellError string           `json:"spell_error,omitempty"`
	Tokens     int              `json:"tokens"`
	Trainable  int              `json:"trainable"`
	Segments   []EpisodeSegment `json:"segments"`
}

// EpisodeTurn is one turn; an assistant turn (a reply) has the number of
// tokens it was sampled as, the k-th trainable segment for the k-th reply.
type EpisodeTurn struct {
	Role      string  `json:"role"`
	Content   string  `json:"content"`
	ToolCalls *string `json:"tool_calls"`
	// Calls are ToolCalls read as calls, for the page to show as text:
	// OpenAI's tool_calls (the function's name and arguments) or an agent
	// world's fenced call ({"tool", "command"}); omitted when there are
	// none or ToolCalls is in neither shape (the page shows it raw).
	Calls  []EpisodeCall `json:"calls,omitempty"`
	Tokens *int          `json:"tokens"` // replies of an exact sequence only
}

// EpisodeCall is one tool call of a turn: the tool's name and its
// arguments as text (the JSON of a function call, a fenced call's
// command).
type EpisodeCall struct {
	Name      string `json:"name"`
	Arguments string `json:"arguments"`
}

// callsOf reads a turn's tool_calls JSON; nil when it is in no known
// shape.
func callsOf(toolCalls *string) []EpisodeCall {
	if toolCalls == nil {
		return nil
	}
	var raw []struct {
		Function *struct {
			Name      string          `json:"name"`
			Arguments json.RawMessage `json:"arguments"`
		} `json:"function"`
		Tool    string `json:"tool"`
		Command string `json:"command"`
	}
	if json.Unmarshal([]byte(*toolCalls), &raw) != nil {
		return nil
	}
	var out []EpisodeCall
	for _, c := range raw {
		switch {
		case c.Function != nil:
			args := string(c.Function.Arguments)
			var s string
			if json.Unmarshal(c.Function.Arguments, &s) == nil {
				args = s
			}
			out = append(out, EpisodeCall{Name: c.Function.Name, Arguments: args})
		case c.Tool != "":
			out = append(out, EpisodeCall{Name: c.Tool, Arguments: c.Command})
		default:
			return nil
		}
	}
	return out
}

// EpisodeSegment is a run of the sequence's tokens with one mask value:
// their ids and, when the episode is spelled, each one's text ("<eos>"
// for a special token).
type EpisodeSegment struct {
	Trainable bool     `json:"trainable"`
	IDs       []int32  `json:"ids"`
	Text      []string `json:"text,omitempty"`
}

// episodeOf shapes t, row i of a table of n rows.
func episodeOf(t tables.Trajectory, i, n int) Episode {
	e := Episode{Row: i, Rows: n, PromptID: t.PromptID, SampleIndex: t.SampleIndex, Status: t.Status, Error: t.Error,
		PolicyVersion: t.PolicyVersion, Outcome: json.RawMessage("null"), Turns: []EpisodeTurn{}, Segments: []EpisodeSegment{}}
	if t.EnvOutcome != nil && json.Valid([]byte(*t.EnvOutcome)) {
		e.Outcome = json.RawMessage(*t.EnvOutcome)
	}
	e.Exact = t.Sequence != nil
	for k, id := range t.Sequence {
		tr := t.Trainable[k] == 1
		if n := len(e.Segments); n == 0 || e.Segments[n-1].Trainable != tr {
			e.Segments = append(e.Segments, EpisodeSegment{Trainable: tr})
		}
		s := &e.Segments[len(e.Segments)-1]
		s.IDs = append(s.IDs, id)
		if tr {
			e.Trainable++
		}
	}
	e.Tokens = len(t.Sequence)
	if sp := spellerFor(t.PolicyVersion); sp != nil {
		e.spell(sp)
	}
	replies := t.ReplyTokens()
	for _, tu := range t.Turns {
		et := EpisodeTurn{Role: tu.Role, Content: tu.Content, ToolCalls: tu.ToolCalls, Calls: callsOf(tu.ToolCalls)}
		if tu.Role == "assistant" && len(replies) > 0 {
			n := replies[0]
			et.Tokens, replies = &n, replies[1:]
		}
		e.Turns = append(e.Turns, et)
	}
	return e
}

// spell gives e's segments their tokens' text; a row without an exact
// sequence stays unspelled.
func (e *Episode) spell(sp Speller) {
	if !e.Exact {
		return
	}
	e.Spelled = true
	for i := range e.Segments {
		sg := &e.Segments[i]
		sg.Text = make([]string, len(sg.IDs))
		for k, id := range sg.IDs {
			sg.Text[k] = sp.TokenText(id)
		}
	}
}

// apiEpisode answers GET /api/episode?ref=&path=&row=: one row of a
// trajectories table as an episode.
func (s *Server) apiEpisode(r *http.Request) (any, error) {
	ref, path, err := objectParams(r)
	if err != nil {
		return nil, err
	}
	row, err := intParam(r, "row", 0, 0)
	if err != nil {
		return nil, err
	}
	e, err := readEpisode(r.Context(), s.st, ref, path, row)
	if err != nil {
		return nil, err
	}
	if !e.Spelled && e.Exact && s.opts.Tokenizer != nil {
		sp, err := s.tokenizer(r.Context(), ref)
		if err != nil {
			e.SpellError = err.Error()
		} else if sp != nil {
			e.spell(sp)
		}
	}
	return e, nil
}

// readEpisode reads row of a trajectories table, decoding only the row
// group that holds it.
func readEpisode(ctx context.Context, st artifacts.Store, ref, path string, row int) (Episode, error) {
	ra, size, err := openObject(ctx, st, ref, path)
	if err != nil {
		return Episode{}, err
	}
	name := ref + ":" + path
	rd, err := tables.NewReader(ra, size, name, tables.Trajectories, nil)
	if err != nil {
		return Episode{}, badRequest("%s is not a trajectories table: %v", name, err)
	}
	n := int(rd.NumRows())
	if row >= n {
		return Episode{}, kindf(artifacts.ErrNotFound, "%s has %d rows; there is no row %d", name, n, row)
	}
	groups, skip := rowGroupsFor(rd.File().ParquetMetadata(), row, 1)
	if rd, err = tables.NewReader(ra, size, name, tables.Trajectories, &tables.ReadOptions{RowGroups: groups}); err != nil {
		return Episode{}, err
	}
	for t, err := range rd.Rows(ctx) {
		if err != nil {
			return Episode{}, fmt.Errorf("read %s row %d: %w", name, row, err)
		}
		if skip == 0 {
			return episodeOf(t, row, n), nil
		}
		skip--
	}
	return Episode{}, fmt.Errorf("read %s: row %d is not in its row group", name, row)
}
