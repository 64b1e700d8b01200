package lakefs

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"

	"github.com/rlpipe/rlpipe/artifacts"
	"github.com/rlpipe/rlpipe/artifacts/internal/lakefsapi"
)

var _ artifacts.Verifier = (*Store)(nil)

// What a check through the API cannot do, as Verify reports it in
// VerifyResult.Limits.
const (
	LimitTrees = "trees: lakeFS keeps a commit's metaranges and ranges itself and the API serves no way to read them back, " +
		"so a commit is checked by reading it and every object it lists (check lakeFS's own storage with lakeFS's tools)"
	LimitQuick = "contents: --quick reads each object's last byte, which shows that lakeFS serves its recorded size, not that its bytes are intact; " +
		"run fsck without --quick to compare them with their recorded SHA-256"
	limitUnrecorded = "contents: %d of %d objects carry no SHA-256 recorded by rlpipe (written by another client, or from a body read once): " +
		"each was read whole, but lakeFS's own checksum is its block store's ETag, which the API gives no way to recompute, so their bytes are not compared"
)

// Verify checks, through the API, what every branch, tag and uncommitted
// change reaches, as the embedded store's Verify does where the API
// allows: every commit of their histories is read, and every object those
// commits and the staged changes list is read back whole and compared
// with the SHA-256 recorded under MetaSHA256 when rlpipe wrote it. An
// object that lakeFS cannot serve, that is shorter or longer than its
// recorded size, or whose bytes hash to another SHA-256, is damaged.
//
// An object without a recorded SHA-256 is read but not compared (counted
// in VerifyResult.Unchecked), and lakeFS's trees are not checked at all:
// VerifyResult.Limits says so. opts.Quick reads only each object's last
// byte. Each object version (physical address and recorded checksum) is
// read once, however many commits list it.
func (s *Store) Verify(ctx context.Context, opts *artifacts.VerifyOptions) (artifacts.VerifyResult, error) {
	v := &lakeVerifier{s: s, quick: artifacts.ValueOf(opts).Quick, commits: map[string]int{}, objectAt: map[string]int{}}
	if err := v.run(ctx); err != nil {
		return v.res, fmt.Errorf("lakefs: verify repository %q: %w", s.repo, err)
	}
	v.res.Limits = append(v.res.Limits, LimitTrees)
	if v.quick {
		v.res.Limits = append(v.res.Limits, LimitQuick)
	} else if v.res.Unchecked > 0 {
		v.res.Limits = append(v.res.Limits, fmt.Sprintf(limitUnrecorded, v.res.Unchecked, v.res.Objects))
	}
	return v.res, nil
}

// lakeVerifier walks a repository's refs and collects the object
// versions they reach, then reads each once.
type lakeVerifier struct {
	s       *Store
	quick   bool
	res     artifacts.VerifyResult
	commits map[string]int // commit id → index in res.Damage, or -1 when sound
	objects []objectUse
	// objectAt maps an object version (see versionKey) to its index in
	// objects.
	objectAt map[string]int
}

// objectUse is an object version to read, with the ref (a commit id, or
// a branch for a staged change) to read it at and the first place that
// uses it (a Damage waiting for a Problem).
type objectUse struct {
	stats lakefsapi.ObjectStats
	ref   string
	at    artifacts.Damage
}

func (v *lakeVerifier) run(ctx context.Context) error {
	type root struct{ ref, id string }
	var roots []root
	var branches []string
	for b, err := range v.s.ListBranches(ctx) {
		if err != nil {
			return err
		}
		roots = append(roots, root{b.Name, b.CommitID})
		branches = append(branches, b.Name)
	}
	for t, err := range v.s.ListTags(ctx) {
		if err != nil {
			return err
		}
		roots = append(roots, root{t.Name, t.CommitID})
	}
	for _, r := range roots {
		if err := v.history(ctx, r.ref, r.id); err != nil {
			return err
		}
	}
	for _, b := range branches {
		if err := v.staged(ctx, b); err != nil {
			return err
		}
	}
	for i := range v.objects {
		if err := v.check(ctx, &v.objects[i]); err != nil {
			return err
		}
	}
	return nil
}

// history reads the commits reachable from head, as ref reaches them,
// and notes the objects each lists.
func (v *lakeVerifier) history(ctx context.Context, ref, head string) error {
	type step struct{ id, child string }
	stack := []step{{head, ""}}
	for len(stack) > 0 {
		st := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		if i, ok := v.commits[st.id]; ok {
			if i >= 0 {
				v.res.Damage[i].Uses++
			}
			continue
		}
		v.commits[st.id] = -1
		v.res.Commits++
		c, err := v.s.GetCommit(ctx, st.id)
		if errors.Is(err, artifacts.ErrCommitNotFound) {
			v.commits[st.id] = len(v.res.Damage)
			v.res.Damage = append(v.res.Damage, artifacts.Damage{Kind: artifacts.DamageCommit, ID: st.id, Ref: ref, Commit: st.child, Uses: 1,
				Problem: "lakeFS does not serve it; the history behind it is not checked"})
			continue
		}
		if err != nil {
			return err
		}
		for o, err := range v.s.objectStats(ctx, c.ID) {
			if err != nil {
				return err
			}
			v.use(o, c.ID, ref, c.ID)
		}
		for _, p := range c.Parents {
			stack = append(stack, step{p, c.ID})
		}
	}
	return nil
}

// staged notes the objects a branch's uncommitted changes add or change.
func (v *lakeVerifier) staged(ctx context.Context, ref string) error {
	for ch, err := range v.s.DiffUncommitted(ctx, ref) {
		if errors.Is(err, artifacts.ErrNotFound) {
			return nil // deleted since it was listed
		}
		if err != nil {
			return err
		}
		if ch.Type == artifacts.ChangeRemoved {
			continue
		}
		o, err := v.s.stat(ctx, ref, ch.Path)
		if errors.Is(err, artifacts.ErrObjectNotFound) {
			continue // removed since the diff
		}
		if err != nil {
			return err
		}
		v.use(o, ref, ref, "")
	}
	return nil
}

// versionKey names an object version: where lakeFS keeps its bytes and
// the checksum they are checked against (two paths may share bytes and
// record different SHA-256s).
func versionKey(o lakefsapi.ObjectStats) string {
	return o.PhysicalAddress + "\x00" + o.Checksum + "\x00" + recordedSHA256(o)
}

// use notes that ref (through commit, or staged when commit is "") uses
// the object version o, read at readRef.
func (v *lakeVerifier) use(o lakefsapi.ObjectStats, readRef, ref, commit string) {
	key := versionKey(o)
	if i, ok := v.objectAt[key]; ok {
		v.objects[i].at.Uses++
		return
	}
	id := recordedSHA256(o)
	if id == "" {
		id = o.Checksum
	}
	v.objectAt[key] = len(v.objects)
	v.objects = append(v.objects, objectUse{stats: o, ref: readRef,
		at: artifacts.Damage{Kind: artifacts.DamageBlob, ID: id, Ref: ref, Commit: commit, Path: o.Path, Uses: 1}})
}

// check reads one object version back. Damage goes to res; the error is
// for a check that could not run (the server unreachable, ctx done).
func (v *lakeVerifier) check(ctx context.Context, u *objectUse) error {
	v.res.Objects++
	d := u.at
	size := sizeOf(u.stats)
	var problem string
	var err error
	if v.quick {
		problem, err = v.lastByte(ctx, u, size)
	} else {
		problem, err = v.whole(ctx, u, size)
	}
	if err != nil {
		return err
	}
	if problem != "" {
		d.Problem = problem
		v.res.Damage = append(v.res.Damage, d)
	}
	return nil
}

// get reads the object version u at its ref, with extra request headers
// (a Range). problem is set, and resp nil, when the server refused to
// serve it; err when the check cannot go on.
func (v *lakeVerifier) get(ctx context.Context, u *objectUse, header http.Header) (resp *http.Response, problem string, err error) {
	what := "read " + u.ref + ":" + u.stats.Path
	arg, err := refArg(u.ref)
	if err != nil {
		return nil, "", fmt.Errorf("%s: %w", what, err)
	}
	header.Set("Accept", "*/*")
	resp, err = v.s.c.do(ctx, request{
		method: http.MethodGet,
		path:   v.s.repoPath("refs", arg, "objects"),
		query:  url.Values{"path": {u.stats.Path}},
		header: header,
	})
	var ae *apiError
	if errors.As(err, &ae) {
		switch {
		case ae.Status == http.StatusRequestedRangeNotSatisfiable:
			return nil, fmt.Sprintf("lakeFS serves fewer bytes than its recorded %d", sizeOf(u.stats)), nil
		case ae.Status == http.StatusNotFound || ae.Status == http.StatusGone || ae.Status >= 500:
			return nil, "lakeFS does not serve it: " + v.s.c.redact(ae.Error()), nil
		}
	}
	if err != nil {
		return nil, "", v.s.c.translate(err, kinds{notFound: artifacts.ErrObjectNotFound}, what)
	}
	return resp, "", nil
}

// whole reads the object and compares its length and SHA-256.
func (v *lakeVerifier) whole(ctx context.Context, u *objectUse, size int64) (string, error) {
	resp, problem, err := v.get(ctx, u, http.Header{})
	if resp == nil {
		return problem, err
	}
	defer drain(resp.Body)
	got, n, err := sha256Of(resp.Body)
	v.res.Bytes += n
	if err != nil {
		return "", fmt.Errorf("read %s:%s: %w", u.ref, u.stats.Path, err)
	}
	if n != size {
		return fmt.Sprintf("lakeFS serves %d bytes, recorded as %d", n, size), nil
	}
	want := recordedSHA256(u.stats)
	if want == "" {
		v.res.Unchecked++
		return "", nil
	}
	if got != want {
		return fmt.Sprintf("its content does not match the SHA-256 recorded under %s when it was written (it reads back as %s)", MetaSHA256, got), nil
	}
	return "", nil
}

// lastByte asks for the object's last byte: lakeFS serves it only when
// its block store holds the recorded size.
func (v *lakeVerifier) lastByte(ctx context.Context, u *objectUse, size int64) (string, error) {
	if size == 0 {
		return "", nil
	}
	last := fmt.Sprintf("%d", size-1)
	resp, problem, err := v.get(ctx, u, http.Header{"Range": {"bytes=" + last + "-" + last}})
	if resp == nil {
		return problem, err
	}
	defer drain(resp.Body)
	if resp.StatusCode != http.StatusPartialContent {
		// The range was ignored: the whole object came back.
		n, err := io.Copy(io.Discard, resp.Body)
		if err != nil {
			return "", fmt.Errorf("read %s:%s: %w", u.ref, u.stats.Path, err)
		}
		if n != size {
			return fmt.Sprintf("lakeFS serves %d bytes, recorded as %d", n, size), nil
		}
	}
	return "", nil
}

func sizeOf(o lakefsapi.ObjectStats) int64 {
	if o.SizeBytes == nil {
		return 0
	}
	return *o.SizeBytes
}

// objectStats lists every object at ref with lakeFS's description of it
// (physical address, lakeFS's checksum, user metadata).
func (s *Store) objectStats(ctx context.Context, ref string) func(func(lakefsapi.ObjectStats, error) bool) {
	return func(yield func(lakefsapi.ObjectStats, error) bool) {
		arg, err := refArg(ref)
		if err != nil {
			yield(lakefsapi.ObjectStats{}, err)
			return
		}
		q := url.Values{"user_metadata": {"true"}}
		yieldPages(ctx, s, s.repoPath("refs", arg, "objects", "ls"), q, maxPageSize, 0, "list "+ref,
			func(o lakefsapi.ObjectStats) lakefsapi.ObjectStats { return o }, yield)
	}
}
