package ollama

import (
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"unicode/utf8"
)

// The parts a short name leaves out, as `ollama pull llama3.2` fills them.
const (
	DefaultHost      = "registry.ollama.ai"
	DefaultNamespace = "library"
	DefaultTag       = "latest"
)

// Length limits of a name's parts, Ollama's: a host may be long (a
// domain with a port), every other part is a path segment of at most 80
// bytes.
const (
	MaxHostLength = 350
	MaxPartLength = 80
)

// ErrInvalidName is wrapped by every error ParseName returns.
var ErrInvalidName = errors.New("invalid model name")

// Name is a model in an Ollama registry: {host}/{namespace}/{model}:{tag}.
// Every part of a Name from ParseName is filled and valid, and none can
// be "", "." or ".." or hold a path separator, so that the manifest path
// built from it stays inside the store.
type Name struct {
	Host      string
	Namespace string
	Model     string
	Tag       string
	// Scheme is "http" or "https" when the name was written with one
	// (http://host/ns/model), "" otherwise (https). It selects how the
	// registry is reached, not which model is meant: String leaves it out.
	Scheme string
}

// ParseName reads a name as `ollama pull` does: {model}[:{tag}],
// {namespace}/{model}[:{tag}] or {host}/{namespace}/{model}[:{tag}], an
// optional http:// or https:// before it, DefaultHost, DefaultNamespace
// and DefaultTag for the parts left out. A part starts with a letter, a
// digit or '_' and goes on with those, '-' and '.' ('.' not in a
// namespace; ':' for a port only in a host). Names of the Hugging Face
// Hub (hf.co/{user}/{repo}:{quant}) are registry names too and parse.
func ParseName(s string) (Name, error) {
	bad := func(format string, a ...any) (Name, error) {
		return Name{}, fmt.Errorf("ollama: %w %s: %s", ErrInvalidName, quoteName(s), fmt.Sprintf(format, a...))
	}
	if s == "" {
		return bad("empty")
	}
	var n Name
	rest := s
	if scheme, after, ok := strings.Cut(rest, "://"); ok {
		if scheme != "http" && scheme != "https" {
			return bad("scheme %q, want http:// or https://", scheme)
		}
		n.Scheme, rest = scheme, after
	}
	// A tag follows the last ':' only when no '/' comes after it: the
	// ':' of host:port is followed by the namespace.
	if i := strings.LastIndexByte(rest, ':'); i > strings.LastIndexByte(rest, '/') {
		rest, n.Tag = rest[:i], rest[i+1:]
		if n.Tag == "" {
			return bad("empty tag after ':'")
		}
	}
	parts := strings.Split(rest, "/")
	switch len(parts) {
	case 1:
		n.Model = parts[0]
	case 2:
		n.Namespace, n.Model = parts[0], parts[1]
	case 3:
		n.Host, n.Namespace, n.Model = parts[0], parts[1], parts[2]
	default:
		return bad("%d '/'-separated parts, want [host/][namespace/]model[:tag]", len(parts))
	}
	if n.Scheme != "" && n.Host == "" {
		return bad("%s:// needs a host: %s://host/namespace/model", n.Scheme, n.Scheme)
	}
	// Every part written, even an empty one, is checked; those left out
	// get their defaults.
	kinds := []string{"host", "namespace", "model"}[3-len(parts):]
	for i, p := range parts {
		if why := checkPart(kinds[i], p); why != "" {
			return bad("%s", why)
		}
	}
	if n.Tag != "" {
		if why := checkPart("tag", n.Tag); why != "" {
			return bad("%s", why)
		}
	}
	if n.Host == "" {
		n.Host = DefaultHost
	}
	if n.Namespace == "" {
		n.Namespace = DefaultNamespace
	}
	if n.Tag == "" {
		n.Tag = DefaultTag
	}
	return n, nil
}

// checkPart says what is wrong with one part of a name, or "".
func checkPart(kind, s string) string {
	limit := MaxPartLength
	if kind == "host" {
		limit = MaxHostLength
	}
	switch {
	case s == "":
		return kind + " is empty"
	case len(s) > limit:
		return fmt.Sprintf("%s is %d bytes long, the limit is %d", kind, len(s), limit)
	case !wordByte(s[0]):
		return fmt.Sprintf("%s starts with %s, want a letter, a digit or '_'", kind, quoteByte(s[0]))
	}
	for i := 1; i < len(s); i++ {
		c := s[i]
		switch {
		case wordByte(c), c == '-':
		case c == '.' && kind != "namespace":
		case c == ':' && kind == "host":
		default:
			allowed := "letters, digits, '_', '-' and '.'"
			switch kind {
			case "namespace":
				allowed = "letters, digits, '_' and '-'"
			case "host":
				allowed = "letters, digits, '_', '-', '.' and ':'"
			}
			return fmt.Sprintf("%s has %s at byte %d; it may hold %s", kind, quoteByte(c), i, allowed)
		}
	}
	return ""
}

// quoteByte shows a byte of a name in an error: quoted when ASCII, in hex
// when it is part of a longer UTF-8 sequence.
func quoteByte(c byte) string {
	if c < utf8.RuneSelf {
		return fmt.Sprintf("%q", rune(c))
	}
	return fmt.Sprintf("non-ASCII byte 0x%02x", c)
}

func wordByte(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_'
}

// quoteName quotes a user's name for an error message, shortened so that
// the message stays one readable line.
func quoteName(s string) string {
	const max = 120
	if len(s) > max {
		return fmt.Sprintf("%q...", s[:max])
	}
	return fmt.Sprintf("%q", s)
}

// String is the full name, host/namespace/model:tag.
func (n Name) String() string {
	return n.Host + "/" + n.Namespace + "/" + n.Model + ":" + n.Tag
}

// DisplayShort is the name as `ollama list` shows it: model:tag for the
// default host and namespace, namespace/model:tag for another namespace
// on the default host, the full name for another host.
func (n Name) DisplayShort() string {
	switch {
	case !strings.EqualFold(n.Host, DefaultHost):
		return n.String()
	case !strings.EqualFold(n.Namespace, DefaultNamespace):
		return n.Namespace + "/" + n.Model + ":" + n.Tag
	}
	return n.Model + ":" + n.Tag
}

// repository is the name's path in the registry API, /v2/{namespace}/{model}/.
func (n Name) repository() string {
	return n.Namespace + "/" + n.Model
}

// relPath is the manifest's path under the store's manifests directory.
func (n Name) relPath() string {
	return filepath.Join(n.Host, n.Namespace, n.Model, n.Tag)
}
