package pipeline

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/rlpipe/rlpipe/artifacts"
)

// memoRecord is what a memoized call left behind.
type memoRecord struct {
	ID     string          `json:"id"`
	Task   string          `json:"task"`
	Key    json.RawMessage `json:"key"`
	Result json.RawMessage `json:"result,omitempty"`
	Error  string          `json:"error,omitempty"`
	// Started counts the processes that started this call: more than 1
	// means a process died between calling and recording, so the call may
	// have run that many times.
	Started int `json:"started"`
}

// memoIntent is written before a call and counts how many processes
// started it.
type memoIntent struct {
	Key     json.RawMessage `json:"key"`
	Started int             `json:"started"`
}

// memoizer records side-effectful calls on the cache branch. Before a call
// it writes an intent record; after it, the result. An intent without a
// result means a previous process died during the call: the call runs
// again and the event says it may have run twice.
type memoizer struct {
	store  artifacts.Store
	events *eventLog
}

func memoPath(id, ext string) string { return "memo/" + id[:2] + "/" + id + ext }

func (m *memoizer) call(ctx context.Context, tc *TaskContext, key any, out any, fn func(ctx context.Context) (any, error)) error {
	k, err := canonicalJSON(key)
	if err != nil {
		return Permanent(fmt.Errorf("memo key of task %s: %w", tc.Task, err))
	}
	id := digestBytes(append([]byte(tc.memoCaller+"\x00"), k...))
	rec, err := m.load(ctx, memoPath(id, ".json"))
	if err != nil {
		return err
	}
	if rec != nil {
		m.events.emit(Event{Kind: EventMemoReplayed, Task: tc.Task, Group: tc.Group, Iteration: tc.Iteration, Key: id})
		if rec.Error != "" {
			return Permanent(fmt.Errorf("recorded: %s", rec.Error))
		}
		if out != nil {
			return json.Unmarshal(rec.Result, out)
		}
		return nil
	}
	intent := memoPath(id, ".intent")
	in := memoIntent{Key: k, Started: 1}
	if prev, err := m.loadIntent(ctx, intent); err != nil {
		return err
	} else if prev != nil {
		in.Started = prev.Started + 1
		m.events.emit(Event{Kind: EventMemoRerun, Task: tc.Task, Group: tc.Group, Iteration: tc.Iteration, Key: id,
			Error: fmt.Sprintf("a previous process died during this call; it runs again and may have run %d times", in.Started)})
	}
	ib, err := json.Marshal(in)
	if err != nil {
		return Permanent(fmt.Errorf("memo intent of task %s: %w", tc.Task, err))
	}
	if _, err := m.store.PutObject(ctx, CacheBranch, intent, bytes.NewReader(ib), nil); err != nil {
		return fmt.Errorf("memo intent: %w", err)
	}
	res, callErr := fn(ctx)
	if callErr != nil && !errors.Is(callErr, ErrPermanent) {
		// Transient: the next attempt calls again, knowingly, so the intent
		// (which would announce a crash) goes.
		_ = m.store.DeleteObject(context.WithoutCancel(ctx), CacheBranch, intent)
		return callErr
	}
	rec = &memoRecord{ID: id, Task: tc.memoCaller, Key: k, Started: in.Started}
	if callErr != nil {
		rec.Error = callErr.Error()
	} else if rec.Result, err = json.Marshal(res); err != nil {
		return Permanent(fmt.Errorf("memo result of task %s: %w", tc.Task, err))
	}
	b, err := json.Marshal(rec)
	if err != nil {
		return Permanent(fmt.Errorf("memo record of task %s: %w", tc.Task, err))
	}
	if _, err := m.store.PutObject(ctx, CacheBranch, memoPath(id, ".json"), bytes.NewReader(b), &artifacts.PutOptions{ContentType: "application/json"}); err != nil {
		return fmt.Errorf("memo record: %w", err)
	}
	m.events.emit(Event{Kind: EventMemoRecorded, Task: tc.Task, Group: tc.Group, Iteration: tc.Iteration, Key: id})
	if callErr != nil {
		return callErr
	}
	if out != nil {
		return json.Unmarshal(rec.Result, out)
	}
	return nil
}

func (m *memoizer) loadIntent(ctx context.Context, path string) (*memoIntent, error) {
	var in memoIntent
	found, decoded, err := getJSON(ctx, m.store, CacheBranch, path, &in)
	if err != nil {
		return nil, fmt.Errorf("memo intent: %w", err)
	}
	if !found {
		return nil, nil
	}
	if !decoded || in.Started < 1 {
		in.Started = 1 // unreadable: a call was started at least once
	}
	return &in, nil
}

func (m *memoizer) load(ctx context.Context, path string) (*memoRecord, error) {
	var r memoRecord
	found, decoded, err := getJSON(ctx, m.store, CacheBranch, path, &r)
	if err != nil {
		return nil, fmt.Errorf("memo lookup: %w", err)
	}
	if !found || !decoded {
		return nil, nil // an unreadable record is no record: the call runs again
	}
	return &r, nil
}
