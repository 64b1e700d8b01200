package pipeline

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"syscall"
	"time"

	"github.com/rlpipe/rlpipe/artifacts"
	"github.com/rlpipe/rlpipe/artifacts/runs"
)

// holder describes the process that holds a run's lock.
type holder struct {
	Host      string    `json:"host"`
	PID       int       `json:"pid"`
	Started   time.Time `json:"started"`
	Heartbeat time.Time `json:"heartbeat"`
}

func (h holder) String() string {
	return fmt.Sprintf("pid %d on %s (started %s, last heartbeat %s)", h.PID, h.Host, h.Started.Format(time.RFC3339), h.Heartbeat.Format(time.RFC3339))
}

// alive reports whether the holder may still be running.
func (h holder) alive(ttl time.Duration) bool {
	host, _ := os.Hostname()
	if h.Host == host {
		err := syscall.Kill(h.PID, 0)
		return (err == nil || errors.Is(err, syscall.EPERM)) && !zombie(h.PID)
	}
	return time.Since(h.Heartbeat) < ttl
}

// zombie reports whether pid has exited but not been reaped (a process
// killed with SIGKILL whose parent has not waited yet): signal 0 still
// reaches it, but it holds nothing. Where /proc is not there, false.
func zombie(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	// pid (comm) state …: comm may hold spaces and parentheses.
	i := bytes.LastIndexByte(b, ')')
	return i >= 0 && i+2 < len(b) && b[i+2] == 'Z'
}

// runLock is a lease on a run, kept as an object on the lock branch and
// refreshed by a heartbeat. A lock left by a dead process on this host is
// taken over at once; one from another host after its TTL.
type runLock struct {
	st   artifacts.Store
	path string
	me   holder
	stop chan struct{}
	done chan struct{}
}

func acquireLock(ctx context.Context, st artifacts.Store, run string, ttl time.Duration) (*runLock, error) {
	if ttl == 0 {
		ttl = DefaultLockTTL
	}
	host, _ := os.Hostname()
	now := time.Now().UTC()
	l := &runLock{st: st, path: runs.LockPath(run), me: holder{Host: host, PID: os.Getpid(), Started: now, Heartbeat: now}, stop: make(chan struct{}), done: make(chan struct{})}
	for try := 0; try < 3; try++ {
		err := l.write(ctx, true)
		if err == nil {
			go l.heartbeat(ttl / 3)
			return l, nil
		}
		if !errors.Is(err, artifacts.ErrObjectExists) {
			return nil, fmt.Errorf("lock run %s: %w", run, err)
		}
		cur, err := l.read(ctx)
		if err != nil {
			return nil, fmt.Errorf("lock run %s: %w", run, err)
		}
		if cur != nil && cur.alive(ttl) {
			return nil, fmt.Errorf("%w: run %s is held by %s; wait for it to finish or stop that process", ErrRunLocked, run, cur)
		}
		// The holder is gone: take the lock over.
		if err := st.DeleteObject(ctx, LockBranch, l.path); err != nil && !errors.Is(err, artifacts.ErrNotFound) {
			return nil, fmt.Errorf("lock run %s: remove stale lock: %w", run, err)
		}
	}
	return nil, fmt.Errorf("%w: run %s: could not take the lock after 3 tries", ErrRunLocked, run)
}

func (l *runLock) write(ctx context.Context, ifAbsent bool) error {
	b, err := json.Marshal(l.me)
	if err != nil {
		return fmt.Errorf("encode the lock holder: %w", err)
	}
	_, err = l.st.PutObject(ctx, LockBranch, l.path, bytes.NewReader(b), &artifacts.PutOptions{IfAbsent: ifAbsent, ContentType: "application/json"})
	return err
}

func (l *runLock) read(ctx context.Context) (*holder, error) {
	var h holder
	found, decoded, err := getJSON(ctx, l.st, LockBranch, l.path, &h)
	switch {
	case err != nil || !found:
		return nil, err
	case !decoded:
		return &holder{}, nil // unreadable: treat as stale
	}
	return &h, nil
}

func (l *runLock) heartbeat(every time.Duration) {
	defer close(l.done)
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-l.stop:
			return
		case <-t.C:
			l.me.Heartbeat = time.Now().UTC()
			_ = l.write(context.Background(), false)
		}
	}
}

func (l *runLock) release(ctx context.Context) error {
	select {
	case <-l.stop:
		return nil
	default:
	}
	close(l.stop)
	<-l.done
	if err := l.st.DeleteObject(ctx, LockBranch, l.path); err != nil && !errors.Is(err, artifacts.ErrNotFound) {
		return fmt.Errorf("release lock: %w", err)
	}
	return nil
}

// DefaultLockTTL is how long a lock held by a process on another host is
// trusted without a heartbeat when RunOptions.LockTTL is zero.
const DefaultLockTTL = time.Minute

// LockHolder describes the process holding a run, as ReadLock reports it.
type LockHolder struct {
	Host      string    `json:"host"`
	PID       int       `json:"pid"`
	Started   time.Time `json:"started"`
	Heartbeat time.Time `json:"heartbeat"`
	// Alive is false when the holder is gone (a dead process on this host,
	// or no heartbeat for DefaultLockTTL): the next run takes the lock over.
	Alive bool `json:"alive"`
}

// RunStatus is a run of a store with the process holding it: a row of
// `rlpipe status` and the start of one of the UI's /api/runs.
type RunStatus struct {
	runs.Info
	Lock *LockHolder `json:"lock"` // nil when nobody holds the run
}

// ListRuns lists the runs of a store (runs.List) with their locks.
func ListRuns(ctx context.Context, st artifacts.Store) ([]RunStatus, error) {
	list, err := runs.List(ctx, st)
	out := make([]RunStatus, len(list))
	for i := 0; err == nil && i < len(list); i++ {
		out[i].Info = list[i]
		out[i].Lock, err = ReadLock(ctx, st, list[i].Run)
	}
	if err != nil {
		return nil, err
	}
	return out, nil
}

// ReadLock reads who holds run's lock: nil when nobody does. An unreadable
// lock is reported as a holder that is not alive, as the engine treats it.
func ReadLock(ctx context.Context, st artifacts.Store, run string) (*LockHolder, error) {
	l := &runLock{st: st, path: runs.LockPath(run)}
	h, err := l.read(ctx)
	if err != nil {
		return nil, fmt.Errorf("read the lock of run %s: %w", run, err)
	}
	if h == nil {
		return nil, nil
	}
	return &LockHolder{Host: h.Host, PID: h.PID, Started: h.Started, Heartbeat: h.Heartbeat,
		Alive: h.PID > 0 && h.alive(DefaultLockTTL)}, nil
}
