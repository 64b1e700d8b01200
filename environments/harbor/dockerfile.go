package harbor

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strings"

	"github.com/rlpipe/rlpipe/sandbox"
)

// Dockerfile is environment/Dockerfile as rlpipe honours it: only as far
// as the host provides the tools. FROM is recorded and ignored (the world
// runs on the host's read-only system); WORKDIR, ENV, COPY (from
// environment/) and RUN (in the sandbox, when the world is built) are
// done in order; anything else refuses the task.
type Dockerfile struct {
	Path string
	// From is the FROM image, recorded only.
	From string
	// Steps are the WORKDIR, ENV, COPY and RUN instructions, in order.
	Steps []Instruction
	// Workdir is the working directory the agent and the verifier start
	// in: the last WORKDIR (or [environment] workdir), "/app" by default.
	Workdir string
	// Env is ENV's variables after the last instruction, with [environment]
	// env: the agent's tool calls and RUN see them.
	Env map[string]string
	// Tops are the world's top-level directories ("app", "root"), each
	// bound writable at /NAME in the agent's sandbox and read-only in the
	// verifier's.
	Tops []string
}

// Instruction is one instruction of a Dockerfile.
type Instruction struct {
	// Line is where the instruction starts (1-based).
	Line int
	// Op is WORKDIR, ENV, COPY or RUN.
	Op string
	// Args is the text after the op, continuation lines joined.
	Args string
	// Dir is the working directory the instruction runs in.
	Dir string
	// Src and Dst are COPY's sources (relative to environment/) and
	// destination (absolute).
	Src []string
	Dst string
	// Env is the environment RUN sees.
	Env map[string]string
}

// DefaultWorkdir is the working directory of a Dockerfile without WORKDIR:
// Harbor's tasks use /app, and the sandbox's root is read-only.
const DefaultWorkdir = "/app"

// reservedTops are top-level directories a world may not have: the
// host's read-only system, the sandbox's own directories, and the
// verifier's.
var reservedTops = []string{"bin", "boot", "dev", "etc", "lib", "lib32", "lib64", "libx32", "proc", "run", "sbin", "sys",
	"tmp", "usr", "var", "work", "tests", "logs", "solution", "check", "candidate", "python"}

// needsNetwork are programs whose use in a RUN means a package manager or
// a download: rlpipe's sandbox has no network and a read-only system.
var needsNetwork = []string{"apt-get", "apt", "aptitude", "dpkg", "yum", "dnf", "apk", "pip", "pip3", "uv", "uvx", "conda",
	"npm", "npx", "yarn", "gem", "cargo", "go", "curl", "wget", "git"}

// shellWords are bash keywords and builtins a RUN may start a command
// with besides programs.
var shellWords = []string{"if", "then", "else", "elif", "fi", "for", "while", "until", "do", "done", "case", "esac", "in",
	"function", "{", "}", "!", "[[", "]]", "cd", "echo", "printf", "export", "set", "unset", "test", "[", "true", "false",
	"exit", "read", "source", ".", "eval", "exec", "shift", "local", "return", "umask", "ulimit", "trap", "wait", "alias",
	"declare", "let", "mapfile", "pushd", "popd", "type", "command", "hash", ":"}

var envName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// ParseDockerfile reads a Dockerfile and checks that rlpipe can build its
// world: every instruction is FROM, WORKDIR, ENV, COPY or RUN; COPY reads
// only from the build context (environment/); RUN needs no package
// manager, network or program the host lacks; paths stay out of the
// host's system directories. A refusal is an ErrUnsupported naming the
// file and line. env is [environment] env, set before the first line.
func ParseDockerfile(file string, env map[string]string) (*Dockerfile, error) {
	b, err := os.ReadFile(file)
	if err != nil {
		return nil, fmt.Errorf("read %s: %v: %w", file, err, ErrTask)
	}
	d := &Dockerfile{Path: file, Workdir: DefaultWorkdir, Env: map[string]string{}}
	for k, v := range env {
		d.Env[k] = v
	}
	tops := map[string]bool{"root": true}
	workdirSet := false
	ctxDir := filepath.Dir(file)
	lines := strings.Split(string(b), "\n")
	for i := 0; i < len(lines); i++ {
		start := i + 1
		line := strings.TrimSpace(strings.TrimSuffix(lines[i], "\r"))
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		for strings.HasSuffix(line, "\\") && i+1 < len(lines) {
			i++
			next := strings.TrimSpace(strings.TrimSuffix(lines[i], "\r"))
			if strings.HasPrefix(next, "#") {
				continue
			}
			line = strings.TrimSuffix(line, "\\") + "\n" + next
		}
		op, args, _ := strings.Cut(line, " ")
		if j := strings.IndexAny(op, "\t\n"); j >= 0 {
			op, args = line[:j], line[j+1:]
		}
		op = strings.ToUpper(op)
		args = strings.TrimSpace(args)
		refuse := func(format string, a ...any) error {
			return fmt.Errorf("%s:%d: %s %s: %w", file, start, op, fmt.Sprintf(format, a...), ErrUnsupported)
		}
		in := Instruction{Line: start, Op: op, Args: args, Dir: d.Workdir}
		switch op {
		case "FROM":
			d.From = args
			continue
		case "WORKDIR":
			p := expand(args, d.Env)
			if !path.IsAbs(p) {
				p = path.Join(d.Workdir, p)
			}
			p = path.Clean(p)
			if err := checkTop(p, tops); err != nil {
				return nil, refuse("%s", err)
			}
			d.Workdir, in.Dir, workdirSet = p, p, true
		case "ENV":
			kv, err := parseEnv(args, d.Env)
			if err != nil {
				return nil, refuse("%v", err)
			}
			for _, p := range kv {
				d.Env[p[0]] = p[1]
			}
		case "COPY":
			words := strings.Fields(args)
			for len(words) > 0 && strings.HasPrefix(words[0], "--") {
				if strings.HasPrefix(words[0], "--from") {
					return nil, refuse("%s copies from another image (a multi-stage build), which rlpipe cannot build", words[0])
				}
				words = words[1:] // --chown, --chmod: everything belongs to the sandbox's user
			}
			if strings.HasPrefix(strings.TrimSpace(strings.Join(words, " ")), "[") {
				if err := json.Unmarshal([]byte(strings.Join(words, " ")), &words); err != nil {
					return nil, refuse("is not a JSON list of paths: %v", err)
				}
			}
			if len(words) < 2 {
				return nil, refuse("needs a source and a destination")
			}
			for _, src := range words[:len(words)-1] {
				clean := path.Clean(src)
				if !filepath.IsLocal(clean) && clean != "." {
					return nil, refuse("%s is outside the build context (environment/)", src)
				}
				if strings.ContainsAny(src, "*?[") {
					return nil, refuse("%s is a pattern; name the files", src)
				}
				if _, err := os.Lstat(filepath.Join(ctxDir, filepath.FromSlash(clean))); err != nil {
					return nil, refuse("%s is not in environment/", src)
				}
				if link, to := symlinkOn(ctxDir, clean); link != "" {
					return nil, refuse("%s goes through environment/%s, a symlink to %s: the build follows no symlink, which could reach the host's files; put the files themselves in environment/", src, link, to)
				}
				in.Src = append(in.Src, clean)
			}
			dst := expand(words[len(words)-1], d.Env)
			dir := strings.HasSuffix(dst, "/")
			if !path.IsAbs(dst) {
				dst = path.Join(d.Workdir, dst)
			}
			dst = path.Clean(dst)
			if dir {
				dst += "/"
			}
			if err := checkTop(strings.TrimSuffix(dst, "/"), tops); err != nil {
				return nil, refuse("%s", err)
			}
			in.Dst = dst
		case "RUN":
			if strings.HasPrefix(args, "[") {
				return nil, refuse("in exec form (a JSON list): write the command in shell form")
			}
			if err := checkRun(args); err != nil {
				return nil, refuse("%v", err)
			}
			in.Env = cloneEnv(d.Env)
		case "ADD":
			return nil, refuse("is not supported (it fetches URLs and unpacks archives): use COPY")
		default:
			return nil, refuse("is not supported: rlpipe builds a world from FROM (ignored), WORKDIR, ENV, COPY and RUN only")
		}
		d.Steps = append(d.Steps, in)
	}
	if err := checkTop(d.Workdir, tops); err != nil { // the default /app
		return nil, fmt.Errorf("%s: %v: %w", file, err, ErrUnsupported)
	}
	_ = workdirSet
	d.Tops = slices.Sorted(func(yield func(string) bool) {
		for t := range tops {
			if !yield(t) {
				return
			}
		}
	})
	return d, nil
}

// setWorkdir applies [environment] workdir, which overrides WORKDIR.
func (d *Dockerfile) setWorkdir(p string) error {
	if !path.IsAbs(p) {
		return fmt.Errorf("%q: want an absolute path: %w", p, ErrTask)
	}
	tops := map[string]bool{}
	for _, t := range d.Tops {
		tops[t] = true
	}
	if err := checkTop(path.Clean(p), tops); err != nil {
		return fmt.Errorf("%v: %w", err, ErrUnsupported)
	}
	d.Workdir = path.Clean(p)
	d.Tops = slices.Sorted(func(yield func(string) bool) {
		for t := range tops {
			if !yield(t) {
				return
			}
		}
	})
	return nil
}

// checkTop adds p's top-level directory to tops, refusing the host's
// system directories and the sandbox's own.
func checkTop(p string, tops map[string]bool) error {
	if p == "/" {
		return fmt.Errorf("/ is the host's read-only system: work in a directory of its own such as /app")
	}
	top := strings.SplitN(strings.TrimPrefix(p, "/"), "/", 2)[0]
	if slices.Contains(reservedTops, top) {
		return fmt.Errorf("%s is under /%s, which rlpipe's sandbox keeps for the host's read-only system or its own use: put the task's files in a directory of its own such as /app", p, top)
	}
	tops[top] = true
	return nil
}

// checkRun refuses a RUN whose commands need a package manager, the
// network or a program the host lacks. Each command's first word is
// checked: the words after a newline, ;, &&, || or |.
func checkRun(script string) error {
	for _, cmd := range regexp.MustCompile(`\n|;|&&|\|\||\|`).Split(script, -1) {
		words := strings.Fields(cmd)
		for len(words) > 0 && (strings.Contains(words[0], "=") && envName.MatchString(strings.SplitN(words[0], "=", 2)[0]) || words[0] == "sudo" ||
			slices.Contains([]string{"then", "else", "do", "!", "{", "("}, words[0])) {
			words = words[1:]
		}
		if len(words) == 0 {
			continue
		}
		prog := strings.Trim(words[0], "()")
		if prog == "" || slices.Contains(shellWords, prog) || strings.ContainsAny(prog, "$`\"'") {
			continue
		}
		base := path.Base(prog)
		if slices.Contains(needsNetwork, base) || (base == "python3" || base == "python") && len(words) > 2 && words[1] == "-m" && words[2] == "pip" {
			return fmt.Errorf("runs %s, which needs the network or a package manager; rlpipe's sandbox has neither: give the task what it needs in environment/ and COPY it", base)
		}
		if strings.Contains(prog, "/") {
			if path.IsAbs(prog) && !hostHas(prog) && !strings.HasPrefix(prog, "/app") {
				return fmt.Errorf("runs %s, which this host lacks", prog)
			}
			continue
		}
		if !hostHas(prog) {
			return fmt.Errorf("runs %s, which this host lacks (not on %s)", prog, sandbox.DefaultPath)
		}
	}
	return nil
}

// hostHas reports whether the sandbox would find prog: an absolute path
// under the host's system, or a name on sandbox.DefaultPath.
func hostHas(prog string) bool {
	if path.IsAbs(prog) {
		fi, err := os.Stat(prog)
		return err == nil && !fi.IsDir()
	}
	for _, dir := range filepath.SplitList(sandbox.DefaultPath) {
		if p, err := exec.LookPath(filepath.Join(dir, prog)); err == nil && p != "" {
			return true
		}
	}
	return false
}

// parseEnv reads ENV's arguments: KEY=VALUE pairs, or KEY VALUE.
func parseEnv(args string, env map[string]string) ([][2]string, error) {
	if k, v, ok := strings.Cut(args, " "); ok && !strings.Contains(k, "=") {
		if !envName.MatchString(k) {
			return nil, fmt.Errorf("%q is not a variable name", k)
		}
		return [][2]string{{k, expand(unquote(strings.TrimSpace(v)), env)}}, nil
	}
	var out [][2]string
	for _, w := range splitWords(args) {
		k, v, ok := strings.Cut(w, "=")
		if !ok || !envName.MatchString(k) {
			return nil, fmt.Errorf("%q is not KEY=VALUE", w)
		}
		out = append(out, [2]string{k, expand(unquote(v), env)})
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("sets nothing")
	}
	return out, nil
}

// splitWords splits on white space outside double or single quotes.
func splitWords(s string) []string {
	var out []string
	var cur strings.Builder
	var quote rune
	for _, r := range s {
		switch {
		case quote != 0:
			if r == quote {
				quote = 0
			}
			cur.WriteRune(r)
		case r == '"' || r == '\'':
			quote = r
			cur.WriteRune(r)
		case r == ' ' || r == '\t' || r == '\n':
			if cur.Len() > 0 {
				out = append(out, cur.String())
				cur.Reset()
			}
		default:
			cur.WriteRune(r)
		}
	}
	if cur.Len() > 0 {
		out = append(out, cur.String())
	}
	return out
}

func unquote(s string) string {
	if len(s) >= 2 && (s[0] == '"' && s[len(s)-1] == '"' || s[0] == '\'' && s[len(s)-1] == '\'') {
		return s[1 : len(s)-1]
	}
	return s
}

// expand replaces $NAME and ${NAME} with env's values (PATH defaults to
// the sandbox's), as Docker expands ENV, WORKDIR and COPY's arguments.
func expand(s string, env map[string]string) string {
	return os.Expand(s, func(k string) string {
		if v, ok := env[k]; ok {
			return v
		}
		if k == "PATH" {
			return sandbox.DefaultPath
		}
		return ""
	})
}

func cloneEnv(env map[string]string) map[string]string {
	out := make(map[string]string, len(env))
	for k, v := range env {
		out[k] = v
	}
	return out
}

// symlinkOn returns the first component of rel (a clean local path in
// dir), itself included, that is a symlink, and where it points; "" when
// none is. The world's build copies with os.Stat and cp, which follow
// them: a link anywhere on the way (sub -> /root) would copy host files.
func symlinkOn(dir, rel string) (link, to string) {
	if rel == "." {
		return "", ""
	}
	at := ""
	for _, part := range strings.Split(rel, "/") {
		at = path.Join(at, part)
		fi, err := os.Lstat(filepath.Join(dir, filepath.FromSlash(at)))
		if err != nil {
			return "", ""
		}
		if fi.Mode()&os.ModeSymlink != 0 {
			to, _ := os.Readlink(filepath.Join(dir, filepath.FromSlash(at)))
			return at, to
		}
	}
	return "", ""
}
