package artifacts

import (
	"context"
	"fmt"
	"strings"
)

// Verifier checks that everything a branch, tag or staged change reaches
// is stored intact: `rlpipe fsck`, and the check `rlpipe gc` makes first.
type Verifier interface {
	// Verify reads every reachable commit, tree and object and checks each
	// against the digest it is named by. Damage is reported in the
	// result, not as an error: the error is for a check that could not
	// run (the store could not be opened, ctx was cancelled).
	Verify(ctx context.Context, opts *VerifyOptions) (VerifyResult, error)
}

// VerifyOptions tune Verify. Nil means a full check.
type VerifyOptions struct {
	// Quick checks that each object's bytes are present with their
	// recorded size instead of reading them; commits and trees are
	// checked in full either way.
	Quick bool
}

// VerifyResult says what Verify checked and what it found damaged.
type VerifyResult struct {
	Commits int   `json:"commits"`
	Trees   int   `json:"trees"`   // metaranges, their chunks and ranges
	Objects int   `json:"objects"` // distinct blobs
	Bytes   int64 `json:"bytes"`   // object bytes read (0 when Quick)
	// Damage lists what is missing or does not match its digest, in the
	// order found; empty for a healthy store.
	Damage []Damage `json:"damage"`
	// Unchecked counts the objects read whole whose content could not be
	// compared with a digest (a backend that records none for them).
	Unchecked int `json:"unchecked,omitempty"`
	// Limits says, a sentence each, what this backend's check cannot
	// do, so that "ok" is not read as more than it is; empty when the
	// check is complete (the embedded store).
	Limits []string `json:"limits,omitempty"`
}

// Kinds of stored things Damage names.
const (
	DamageCommit    = "commit"
	DamageMetaRange = "metarange" // a commit's list of ranges
	DamageChunk     = "chunk"     // a node under a large tree's metarange: a list of ranges, or of chunks
	DamageRange     = "range"     // a sorted run of a tree's entries
	DamageBlob      = "blob"      // an object's bytes
	DamageStaged    = "staged"    // a branch's uncommitted change
)

// Damage is one stored thing that is missing or wrong, with the first
// place found that uses it.
type Damage struct {
	Kind    string `json:"kind"`    // one of the Damage* kinds
	ID      string `json:"id"`      // its id: a commit id, tree id or blob digest
	Problem string `json:"problem"` // what is wrong with it
	// Ref is a branch or tag that reaches it; Commit the commit that
	// names it (a commit's child; the commit holding a tree or blob), ""
	// for a ref's head or a staged change; Path the object path that
	// uses a blob, or the first path a range or chunk covers.
	Ref    string `json:"ref"`
	Commit string `json:"commit,omitempty"`
	Path   string `json:"path,omitempty"`
	// Uses counts the places that reach it (paths in commits, parents).
	Uses int `json:"uses"`
}

func (d Damage) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s %s: %s (", d.Kind, d.ID, d.Problem)
	switch {
	case d.Path != "" && d.Commit != "":
		fmt.Fprintf(&b, "%s in commit %s, reached from %s", d.Path, shortID(d.Commit), d.Ref)
	case d.Path != "":
		fmt.Fprintf(&b, "%s:%s, uncommitted", d.Ref, d.Path)
	case d.Commit != "":
		fmt.Fprintf(&b, "named by commit %s, reached from %s", shortID(d.Commit), d.Ref)
	default:
		fmt.Fprintf(&b, "head of %s", d.Ref)
	}
	if d.Uses > 1 {
		fmt.Fprintf(&b, ", and %d other use", d.Uses-1)
		if d.Uses > 2 {
			b.WriteString("s")
		}
	}
	b.WriteString(")")
	return b.String()
}

func shortID(id string) string {
	if len(id) > 12 {
		return id[:12]
	}
	return id
}

// DamagedError refuses an operation on a damaged store; it matches
// ErrIntegrity. Op says what was refused.
type DamagedError struct {
	Op     string
	Damage []Damage
}

func (e *DamagedError) Error() string {
	const show = 3
	var b strings.Builder
	fmt.Fprintf(&b, "%s: the store is damaged: ", e.Op)
	for i, d := range e.Damage {
		if i == show {
			fmt.Fprintf(&b, "; and %d more", len(e.Damage)-show)
			break
		}
		if i > 0 {
			b.WriteString("; ")
		}
		b.WriteString(d.String())
	}
	b.WriteString(" (run `rlpipe fsck` to list the damage; restore the store from a copy, or delete the refs that reach it)")
	return b.String()
}

func (e *DamagedError) Unwrap() error { return ErrIntegrity }
