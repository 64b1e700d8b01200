package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"testing"

	"github.com/rlpipe/rlpipe/artifacts"
	"github.com/rlpipe/rlpipe/artifacts/tables"
	"github.com/rlpipe/rlpipe/ui"
)

// checkUIEpisodes serves the store with the UI on a free loopback port and
// asks it, as the episode page does (GET /api/episode), for every row of
// the committed trajectories table at path on branch: each must come back
// as its episode, turn by turn, with exactly the tokens its trainable
// mask marks shown as trainable, the k-th trainable run being the k-th
// reply's tokens.
func checkUIEpisodes(t *testing.T, st artifacts.Store, branch, path string, trajs []tables.Trajectory) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	srv, err := ui.New(st, &ui.Options{Addr: "127.0.0.1:0"})
	if err != nil {
		t.Fatal(err)
	}
	l, err := srv.Listen(ctx)
	if err != nil {
		t.Fatal(err)
	}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ctx, l) }()
	defer func() {
		cancel()
		if err := <-served; err != nil {
			t.Errorf("ui: Serve: %v", err)
		}
	}()
	base := "http://" + l.Addr().String()
	for i, tr := range trajs {
		name := fmt.Sprintf("row %d (%s #%d)", i, tr.PromptID, tr.SampleIndex)
		q := url.Values{"ref": {branch}, "path": {path}, "row": {fmt.Sprint(i)}}
		resp, err := http.Get(base + "/api/episode?" + q.Encode())
		if err != nil {
			t.Fatal(err)
		}
		var e ui.Episode
		err = json.NewDecoder(resp.Body).Decode(&e)
		resp.Body.Close()
		if err != nil || resp.StatusCode != http.StatusOK {
			t.Fatalf("GET /api/episode %s: %s: %v", name, resp.Status, err)
		}
		if e.Row != i || e.Rows != len(trajs) || e.PromptID != tr.PromptID || e.SampleIndex != tr.SampleIndex || e.Status != tr.Status || !e.Exact {
			t.Errorf("%s: the UI shows row %d of %d, %s #%d, status %s, exact %v", name, e.Row, e.Rows, e.PromptID, e.SampleIndex, e.Status, e.Exact)
			continue
		}
		// The sequence, token by token, with the mask the row holds.
		var ids, mask []int32
		var runs [][]int32 // the trainable runs
		for k, s := range e.Segments {
			if len(s.IDs) == 0 || (k > 0 && e.Segments[k-1].Trainable == s.Trainable) {
				t.Errorf("%s: segment %d is empty or does not change the mask", name, k)
			}
			for _, id := range s.IDs {
				ids = append(ids, id)
				mask = append(mask, map[bool]int32{true: 1, false: 0}[s.Trainable])
			}
			if s.Trainable {
				runs = append(runs, s.IDs)
			}
		}
		ones := 0
		for _, m := range tr.Trainable {
			ones += int(m)
		}
		if !slices.Equal(ids, tr.Sequence) || !slices.Equal(mask, tr.Trainable) || e.Tokens != len(tr.Sequence) || e.Trainable != ones {
			t.Errorf("%s: the UI shows %d tokens, %d trainable; the row has %d, %d; they first differ at token %d", name, e.Tokens, e.Trainable, len(tr.Sequence), ones, firstDiff(ids, mask, tr))
			continue
		}
		// Turn by turn: every turn as the row holds it, each reply with
		// the tokens it was sampled as, which are its trainable run.
		if len(e.Turns) != len(tr.Turns) {
			t.Errorf("%s: %d turns shown, %d in the row", name, len(e.Turns), len(tr.Turns))
			continue
		}
		reply, at := 0, 0
		for k, tu := range e.Turns {
			if tu.Role != tr.Turns[k].Role || tu.Content != tr.Turns[k].Content {
				t.Errorf("%s: turn %d shown as %s %q, the row's %s %q", name, k, tu.Role, tu.Content, tr.Turns[k].Role, tr.Turns[k].Content)
			}
			if tu.Role != "assistant" {
				continue
			}
			if tu.Tokens == nil || reply >= len(runs) || len(runs[reply]) != *tu.Tokens || !slices.Equal(runs[reply], tr.TokenIDs[at:at+*tu.Tokens]) {
				t.Errorf("%s: reply %d (turn %d) is not shown as its own trainable tokens", name, reply, k)
				break
			}
			at += *tu.Tokens
			reply++
		}
		if reply != len(runs) || at != len(tr.TokenIDs) {
			t.Errorf("%s: %d replies shown over %d tokens; %d trainable runs, %d reply tokens", name, reply, at, len(runs), len(tr.TokenIDs))
		}
	}
}

// firstDiff is the first position where the shown ids or mask differ from
// the row's, -1 when none does.
func firstDiff(ids, mask []int32, tr tables.Trajectory) int {
	for k := range max(len(ids), len(tr.Sequence)) {
		if k >= len(ids) || k >= len(tr.Sequence) || ids[k] != tr.Sequence[k] || mask[k] != tr.Trainable[k] {
			return k
		}
	}
	return -1
}
