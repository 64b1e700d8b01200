package artifacts

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"unicode/utf8"
)

// Name rules shared by every backend, taken from lakeFS so that a name
// accepted by the embedded store is accepted by a lakeFS server too.
var (
	reBranch     = regexp.MustCompile(`^\w[-\w]*$`)
	reRepository = regexp.MustCompile(`^[a-z0-9][a-z0-9-]{2,62}$`)
	reCommitID   = regexp.MustCompile(`^[0-9a-f]{64}$`)
)

// ValidateBranchName reports whether name can name a branch: a word
// character followed by word characters and dashes (no slashes; lakeFS
// rejects them).
func ValidateBranchName(name string) error {
	if !reBranch.MatchString(name) {
		return fmt.Errorf("%w: branch name %q: use letters, digits, '_' and '-', starting with a letter, digit or '_'", ErrInvalid, name)
	}
	return nil
}

// ValidateRepositoryName reports whether name can name a repository: 3–63
// lower-case letters, digits and dashes, not starting with a dash.
func ValidateRepositoryName(name string) error {
	if !reRepository.MatchString(name) {
		return fmt.Errorf("%w: repository name %q: use 3-63 lower-case letters, digits and '-'", ErrInvalid, name)
	}
	return nil
}

// ValidateTagName reports whether name can name a tag: git's rules, and
// no '~' or '^' (which lakeFS would accept but which read as ancestry
// operators in a ref expression).
func ValidateTagName(name string) error {
	bad := name == "" || name == "@" || strings.HasPrefix(name, "-") || strings.HasSuffix(name, ".") ||
		strings.HasSuffix(name, ".lock") || strings.HasSuffix(name, "/") || strings.Contains(name, "..") ||
		strings.Contains(name, "//") || strings.Contains(name, "@{") || strings.ContainsAny(name, " ~^:?*[\\\t\n")
	if !bad {
		for _, r := range name {
			if r < 0x20 || r == 0x7f {
				bad = true
				break
			}
		}
	}
	if bad {
		return fmt.Errorf("%w: tag name %q: no spaces, control characters, ~ ^ : ? * [ \\, '..' or a trailing '.' or '/'", ErrInvalid, name)
	}
	return nil
}

// ValidatePath reports whether p can name an object: non-empty, at most
// 1024 bytes, valid UTF-8 without NUL. Paths are relative; a leading '/' is
// not allowed.
func ValidatePath(p string) error {
	switch {
	case p == "":
		return fmt.Errorf("%w: empty object path", ErrInvalid)
	case len(p) > 1024:
		return fmt.Errorf("%w: object path longer than 1024 bytes", ErrInvalid)
	case strings.HasPrefix(p, "/"):
		return fmt.Errorf("%w: object path %q starts with '/': paths are relative to the repository root", ErrInvalid, p)
	case strings.ContainsRune(p, 0):
		return fmt.Errorf("%w: object path %q contains NUL", ErrInvalid, p)
	case !utf8.ValidString(p):
		return fmt.Errorf("%w: object path %q is not valid UTF-8", ErrInvalid, p)
	}
	return nil
}

// IsCommitID reports whether s has the form of a full commit id (64
// lower-case hex digits).
func IsCommitID(s string) bool { return reCommitID.MatchString(s) }

// RefOp is one step of ancestry navigation in a ref expression.
type RefOp struct {
	// Kind is '~' (walk N first parents) or '^' (take the N-th parent).
	Kind byte
	N    int
}

// RefExpr is a parsed ref expression: a base name followed by ancestry
// operators, e.g. "main~2^2" or "v1.0^" or "3f2a9c".
type RefExpr struct {
	// Base is a branch, tag, full commit id or unique commit-id prefix.
	Base string
	// CommittedOnly is set by a trailing '@' on the base ("main@"): read the
	// branch's last commit, ignoring staged changes. A trailing '$' (the
	// default for branches) is accepted and dropped.
	CommittedOnly bool
	Ops           []RefOp
}

// maxRefOpN bounds ~N and ^N so that a typo cannot walk a history for hours.
const maxRefOpN = 1 << 20

// ParseRef parses a ref expression. Grammar:
//
//	ref  = base [ "@" | "$" ] { op }
//	op   = "~" [ digits ] | "^" [ digits ]
//
// A bare "~" or "^" means 1; "^0" means the commit itself. The base may not
// contain whitespace, '~', '^' or ':'.
func ParseRef(s string) (RefExpr, error) {
	var e RefExpr
	i := strings.IndexAny(s, "~^")
	base := s
	if i >= 0 {
		base = s[:i]
	}
	if strings.HasSuffix(base, "@") {
		e.CommittedOnly = true
		base = base[:len(base)-1]
	} else if strings.HasSuffix(base, "$") {
		base = base[:len(base)-1]
	}
	if base == "" {
		return RefExpr{}, fmt.Errorf("%w: %q: a ref starts with a branch, tag or commit id", ErrInvalidRef, s)
	}
	if strings.ContainsAny(base, " \t\r\n:@$") || !utf8.ValidString(base) || strings.ContainsRune(base, 0) {
		return RefExpr{}, fmt.Errorf("%w: %q: a ref name has no whitespace, ':', '@' or '$' inside it", ErrInvalidRef, s)
	}
	e.Base = base
	if i < 0 {
		return e, nil
	}
	rest := s[i:]
	for len(rest) > 0 {
		kind := rest[0]
		if kind != '~' && kind != '^' {
			return RefExpr{}, fmt.Errorf("%w: %q: unexpected %q after ancestry operators (want ~N or ^N)", ErrInvalidRef, s, rest[0])
		}
		j := 1
		for j < len(rest) && rest[j] >= '0' && rest[j] <= '9' {
			j++
		}
		n := 1
		if j > 1 {
			v, err := strconv.Atoi(rest[1:j])
			if err != nil || v > maxRefOpN {
				return RefExpr{}, fmt.Errorf("%w: %q: %c%s is out of range (at most %d)", ErrInvalidRef, s, kind, rest[1:j], maxRefOpN)
			}
			n = v
		}
		e.Ops = append(e.Ops, RefOp{Kind: kind, N: n})
		rest = rest[j:]
	}
	return e, nil
}

// String formats the expression canonically (explicit counts).
func (e RefExpr) String() string {
	var b strings.Builder
	b.WriteString(e.Base)
	if e.CommittedOnly {
		b.WriteByte('@')
	}
	for _, op := range e.Ops {
		b.WriteByte(op.Kind)
		b.WriteString(strconv.Itoa(op.N))
	}
	return b.String()
}

// SplitArtifact splits a git-style artifact name "REF:PATH" into its ref
// and path. The path may be empty ("main:" or "main") for the whole ref.
func SplitArtifact(s string) (ref, path string, err error) {
	ref, path, _ = strings.Cut(s, ":")
	if ref == "" {
		return "", "", fmt.Errorf("%w: %q: name an artifact as REF:PATH, e.g. main:data/prompts.parquet", ErrInvalidRef, s)
	}
	if _, err := ParseRef(ref); err != nil {
		return "", "", err
	}
	return ref, path, nil
}
