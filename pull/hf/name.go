package hf

import (
	"errors"
	"fmt"
	"net/url"
	"strings"
)

// DefaultQuant is the tag a name without one asks for, as Ollama and
// llama.cpp choose.
const DefaultQuant = "Q4_K_M"

// ErrBadName is wrapped by ParseName's errors.
var ErrBadName = errors.New("is not a valid Hugging Face name")

// Name is a parsed hf.co name.
type Name struct {
	Repo     string // "user/repo"
	File     string // a .gguf path in the repository, when the name gives one
	Quant    string // the tag after ':', as written (matched without regard to case); "" for DefaultQuant
	Revision string // the branch, tag or commit after '@'; "" for main
}

// hosts are the names a Hugging Face model name may start with.
var hosts = map[string]bool{"hf.co": true, "huggingface.co": true, "www.huggingface.co": true}

// IsName reports whether s is meant as a Hugging Face name: it starts
// with hf.co/ or huggingface.co/ (after an optional https://). It does
// not check the rest; ParseName says what is wrong with it.
func IsName(s string) bool {
	_, rest := cutScheme(s)
	host, _, ok := strings.Cut(rest, "/")
	return ok && hosts[strings.ToLower(host)]
}

func cutScheme(s string) (bool, string) {
	for _, p := range []string{"https://", "http://"} {
		if len(s) >= len(p) && strings.EqualFold(s[:len(p)], p) {
			return true, s[len(p):]
		}
	}
	return false, s
}

// ParseName reads a name in one of the forms
//
//	hf.co/{user}/{repo}[:{quant}][@{revision}]
//	hf.co/{user}/{repo}/{path/to/file.gguf}[@{revision}]
//	https://huggingface.co/{user}/{repo}/{blob|resolve}/{revision}/{file.gguf}
//
// huggingface.co may stand for hf.co, and "@{revision}" may come before
// ":{quant}". The quant tag picks the repository's .gguf file whose name
// contains it (Choose); a path names a file exactly. The last form is a
// file's address as the Hub's pages show it.
func ParseName(s string) (Name, error) {
	bad := func(why string) (Name, error) { return Name{}, fmt.Errorf("hf: %q %w: %s", s, ErrBadName, why) }
	isURL, rest := cutScheme(s)
	host, rest, ok := strings.Cut(rest, "/")
	if !ok || !hosts[strings.ToLower(host)] {
		return bad("a Hugging Face name starts with hf.co/ or huggingface.co/")
	}
	if isURL {
		rest, _, _ = strings.Cut(rest, "#")
		rest, _, _ = strings.Cut(rest, "?") // ?download=true on a copied link
	}
	if hasControl(rest) {
		return bad("it has a space or a control character")
	}
	user, rest, ok := strings.Cut(rest, "/")
	if !ok {
		return bad("want hf.co/{user}/{repo}")
	}
	var n Name
	path, rev, hasRev := strings.Cut(rest, "@")
	tagged := false
	if hasRev {
		rev, n.Quant, tagged = strings.Cut(rev, ":")
		if rev == "" {
			return bad("nothing after '@': want a branch, tag or commit")
		}
	}
	if p, q, ok := strings.Cut(path, ":"); ok {
		if tagged {
			return bad("two quant tags")
		}
		path, n.Quant, tagged = p, q, true
	}
	if tagged && !validTag(n.Quant) {
		return bad("the quant tag after ':' must be letters, digits, '_', '-' or '.' (Q4_K_M, say)")
	}
	repo, file, _ := strings.Cut(path, "/")
	file = strings.TrimSuffix(file, "/")
	if seg := strings.SplitN(file, "/", 3); len(seg) == 3 && (seg[0] == "blob" || seg[0] == "resolve") {
		if hasRev {
			return bad("two revisions")
		}
		// The Hub's addresses escape a revision's slashes (refs%2Fpr%2F1).
		r, err := url.PathUnescape(seg[1])
		if err != nil {
			return bad("the revision is badly escaped")
		}
		rev, file, hasRev = r, seg[2], true
	}
	if isURL && file != "" {
		f, err := url.PathUnescape(file)
		if err != nil {
			return bad("the file name is badly escaped")
		}
		file = f
	}
	if why := checkID(user); why != "" {
		return bad("the user " + why)
	}
	if why := checkID(repo); why != "" {
		return bad("the repository " + why)
	}
	if len(user)+1+len(repo) > 96 {
		return bad("a repository id is at most 96 characters")
	}
	if file != "" {
		if tagged {
			return bad("a file name and a quant tag: give one")
		}
		if why := checkFile(file); why != "" {
			return bad(why)
		}
	}
	if hasRev {
		if why := checkRevision(rev); why != "" {
			return bad(why)
		}
	}
	n.Repo, n.File, n.Revision = user+"/"+repo, file, rev
	return n, nil
}

// String is the name in its canonical form, which ParseName reads back.
func (n Name) String() string {
	s := "hf.co/" + n.Repo
	if n.File != "" {
		s += "/" + n.File
	} else if n.Quant != "" {
		s += ":" + n.Quant
	}
	if n.Revision != "" {
		s += "@" + n.Revision
	}
	return s
}

// rev is the revision the name asks for.
func (n Name) rev() string {
	if n.Revision == "" {
		return "main"
	}
	return n.Revision
}

// checkID applies the Hub's rule for user and repository names: letters,
// digits, '-', '_' and '.', neither starting nor ending with '-' or '.',
// without "--" or "..". "--" matters here too: the cache folder
// models--{user}--{repo} would be ambiguous.
func checkID(s string) string {
	switch {
	case s == "":
		return "name is empty"
	case strings.Contains(s, "--") || strings.Contains(s, ".."):
		return "name has '--' or '..'"
	case strings.Trim(s, "-.") != s:
		return "name starts or ends with '-' or '.'"
	}
	for _, c := range []byte(s) {
		if !isWordByte(c) && c != '-' && c != '.' {
			return fmt.Sprintf("name has %q: only letters, digits, '-', '_' and '.'", c)
		}
	}
	return ""
}

func isWordByte(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_'
}

func validTag(s string) bool {
	if s == "" || len(s) > 64 {
		return false
	}
	for _, c := range []byte(s) {
		if !isWordByte(c) && c != '-' && c != '.' {
			return false
		}
	}
	return true
}

// checkFile accepts a relative path to a .gguf file: it becomes a path
// in the cache, so no "..", no empty or dot segments, no backslash. '@',
// ':', spaces and paths that read as a Hub address would not survive
// String and ParseName, so they are refused too.
func checkFile(f string) string {
	if len(f) > 1024 {
		return "the file path is over 1024 characters"
	}
	if strings.ContainsAny(f, `\@:`) || hasControl(f) {
		return "the file path has a space, a control character, '\\', '@' or ':'"
	}
	segs := strings.Split(f, "/")
	for _, seg := range segs {
		if seg == "" || seg == "." || seg == ".." {
			return "the file path has an empty, '.' or '..' part"
		}
	}
	if len(segs) >= 3 && (segs[0] == "blob" || segs[0] == "resolve") {
		return "a file under blob/{x}/ or resolve/{x}/ reads as the Hub's address of another; it cannot be named"
	}
	if base := f[strings.LastIndexByte(f, '/')+1:]; len(base) <= len(".gguf") || !isGGUF(base) {
		return "a file in the name must be a .gguf file"
	}
	return ""
}

// checkRevision accepts what git accepts as a ref name and a cache path
// can hold: refs/{revision} is a file in the cache.
func checkRevision(r string) string {
	if len(r) > 256 {
		return "the revision is over 256 characters"
	}
	if strings.ContainsAny(r, `~^:?*[\`) || strings.Contains(r, "..") || strings.Contains(r, "@{") || hasControl(r) {
		return "the revision has a character git does not allow in a ref"
	}
	for _, seg := range strings.Split(r, "/") {
		if seg == "" || seg[0] == '.' {
			return "the revision has an empty part or one that starts with '.'"
		}
	}
	return ""
}

func isGGUF(f string) bool {
	return len(f) >= len(".gguf") && strings.EqualFold(f[len(f)-len(".gguf"):], ".gguf")
}

func hasControl(s string) bool {
	return strings.ContainsFunc(s, func(r rune) bool { return r <= ' ' || r == 0x7f })
}
