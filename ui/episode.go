package ui

import (
	"bytes"
	"encoding/json"
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
	Exact     bool             `json:"exact"`
	Tokens    int              `json:"tokens"`
	Trainable int              `json:"trainable"`
	Segments  []EpisodeSegment `json:"segments"`
}

// EpisodeTurn is one turn; an assistant turn (a reply) has the number of
// tokens it was sampled as, the k-th trainable segment for the k-th reply.
type EpisodeTurn struct {
	Role      string  `json:"role"`
	Content   string  `json:"content"`
	ToolCalls *string `json:"tool_calls"`
	Tokens    *int    `json:"tokens"` // replies of an exact sequence only
}

// EpisodeSegment is a run of the sequence's tokens with one mask value.
type EpisodeSegment struct {
	Trainable bool    `json:"trainable"`
	IDs       []int32 `json:"ids"`
}

// episodeOf shapes row i of rows.
func episodeOf(rows []tables.Trajectory, i int) Episode {
	t := rows[i]
	e := Episode{Row: i, Rows: len(rows), PromptID: t.PromptID, SampleIndex: t.SampleIndex, Status: t.Status, Error: t.Error,
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
	replies := t.ReplyTokens()
	for _, tu := range t.Turns {
		et := EpisodeTurn{Role: tu.Role, Content: tu.Content, ToolCalls: tu.ToolCalls}
		if tu.Role == "assistant" && len(replies) > 0 {
			n := replies[0]
			et.Tokens, replies = &n, replies[1:]
		}
		e.Turns = append(e.Turns, et)
	}
	return e
}

// apiEpisode answers GET /api/episode?ref=&path=&row=: one row of a
// trajectories table as an episode.
func (s *Server) apiEpisode(w http.ResponseWriter, r *http.Request) {
	ref, path, err := objectParams(r)
	if err != nil {
		fail(w, r, err)
		return
	}
	row, err := intParam(r, "row", 0, 0)
	if err != nil {
		fail(w, r, err)
		return
	}
	b, err := readAll(r.Context(), s.st, ref, path)
	if err != nil {
		fail(w, r, err)
		return
	}
	rows, err := tables.Read(bytes.NewReader(b), int64(len(b)), ref+":"+path, tables.Trajectories)
	if err != nil {
		fail(w, r, badRequest("%s:%s is not a trajectories table: %v", ref, path, err))
		return
	}
	if row >= len(rows) {
		fail(w, r, kindf(artifacts.ErrNotFound, "%s:%s has %d rows; there is no row %d", ref, path, len(rows), row))
		return
	}
	writeJSON(w, http.StatusOK, episodeOf(rows, row))
}
