package hf

import (
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"

	"ringlm/pull"
)

// The ways a repository's files can fail a name.
var (
	ErrNoGGUF    = errors.New("no GGUF files")
	ErrAmbiguous = errors.New("ambiguous quant tag")
	ErrSplit     = errors.New("split GGUF files are not supported yet")
)

// failure is an error whose message is written for the user and which is
// its kind for errors.Is.
type failure struct {
	msg  string
	kind error
}

func (f *failure) Error() string { return f.msg }
func (f *failure) Unwrap() error { return f.kind }

func fail(kind error, format string, args ...any) error {
	return &failure{"hf: " + fmt.Sprintf(format, args...), kind}
}

// Choose picks the file n names among a repository's files:
//
//   - n.File: that file, which must be there;
//   - else the .gguf file whose path contains the quant tag (DefaultQuant
//     when n has none), without regard to case. A match of the tag as a
//     whole component, ended by '-', '.', '/' or the name's end, is
//     preferred (":Q4_0" is Q4_0, not Q4_0_4_4; ":F16" is not BF16); then
//     one bounded by '_' too; then any substring. Several matches at the
//     first level that has any is an error listing them (ErrAmbiguous);
//   - with no tag given and no DefaultQuant file, the only GGUF, else the
//     first by name.
//
// Vision projectors (mmproj*.gguf) are not models and are only chosen by
// path. The parts of a split GGUF (-00001-of-00003.gguf) count as one
// file, and choosing it is ErrSplit for now. Errors are
// pull.ErrNotFound, ErrNoGGUF, ErrAmbiguous or ErrSplit.
func Choose(n Name, files []string) (string, error) {
	var models []string
	seen := map[string]bool{}
	for _, f := range files {
		if !isGGUF(f) || checkFile(f) != "" || isProjector(f) {
			continue
		}
		f = firstPart(f)
		if !seen[f] {
			seen[f] = true
			models = append(models, f)
		}
	}
	slices.Sort(models)
	if n.File != "" {
		if !slices.Contains(files, n.File) {
			return "", fail(pull.ErrNotFound, "%s: no such file in %s%s", n, n.Repo, listing(models))
		}
		return n.File, refuseSplit(n, n.File)
	}
	if len(models) == 0 {
		return "", fail(ErrNoGGUF, "%s has no GGUF files: ringlm runs GGUF models; look for a GGUF version of it (often a repository named …-GGUF)", n)
	}
	tag, subject := n.Quant, n.String()
	if tag == "" {
		tag = DefaultQuant
		subject += " (:" + DefaultQuant + ")"
	}
	hits := matchTag(models, tag)
	switch {
	case len(hits) > 1:
		return "", fail(ErrAmbiguous, "%s is ambiguous: it matches %s; name one: %s", subject, strings.Join(hits, ", "), suggest(n, hits))
	case len(hits) == 1:
		return hits[0], refuseSplit(n, hits[0])
	case n.Quant != "":
		return "", fail(pull.ErrNotFound, "%s matches no file%s", n, listing(models))
	}
	return models[0], refuseSplit(n, models[0])
}

// listing is "; its GGUF files: a, b, c" (at most 12 of them).
func listing(models []string) string {
	if len(models) == 0 {
		return ""
	}
	s := "; its GGUF files: " + strings.Join(models[:min(len(models), 12)], ", ")
	if len(models) > 12 {
		s += fmt.Sprintf(" and %d more", len(models)-12)
	}
	return s
}

// suggest names the candidates as the user would type them.
func suggest(n Name, hits []string) string {
	var out []string
	for _, h := range hits {
		m := Name{Repo: n.Repo, Quant: QuantOf(h), Revision: n.Revision}
		if m.Quant == "" || len(matchTag(hits, m.Quant)) != 1 {
			m = Name{Repo: n.Repo, File: h, Revision: n.Revision}
		}
		out = append(out, m.String())
	}
	return strings.Join(out, " or ")
}

// matchTag returns the models matching tag at the first level of the
// three (whole component, '_'-bounded, substring) that any matches.
func matchTag(models []string, tag string) []string {
	tag = strings.ToLower(tag)
	for level := range 3 {
		var hits []string
		for _, m := range models {
			if tagAt(strings.ToLower(m[:len(m)-len(".gguf")]), tag, level) {
				hits = append(hits, m)
			}
		}
		if len(hits) > 0 {
			return hits
		}
	}
	return nil
}

// tagAt reports whether tag occurs in s at the given level: 0, as a
// whole component (after the start or one of "/-._", before the end or
// one of "/-."); 1, bounded by "_" too on its right; 2, anywhere.
func tagAt(s, tag string, level int) bool {
	for i := 0; ; {
		j := strings.Index(s[i:], tag)
		if j < 0 {
			return false
		}
		a, b := i+j, i+j+len(tag)
		left := a == 0 || strings.IndexByte("/-._", s[a-1]) >= 0
		right := b == len(s) || strings.IndexByte("/-.", s[b]) >= 0 || (level >= 1 && s[b] == '_')
		if level == 2 || left && right {
			return true
		}
		i = a + 1
	}
}

// splitRE matches a split GGUF's part suffix, as llama-gguf-split writes it.
var splitRE = regexp.MustCompile(`(?i)-(\d{5})-of-(\d{5})\.gguf$`)

// firstPart maps every part of a split GGUF to its first part's name.
func firstPart(f string) string {
	m := splitRE.FindStringSubmatchIndex(f)
	if m == nil {
		return f
	}
	return f[:m[2]] + "00001" + f[m[3]:]
}

func refuseSplit(n Name, f string) error {
	m := splitRE.FindStringSubmatch(f)
	if m == nil {
		return nil
	}
	return fail(ErrSplit, "%s is split in %s files (%s): ringlm does not load split GGUF files yet; merge them with llama-gguf-split --merge and run the merged file",
		n, strings.TrimLeft(m[2], "0"), f)
}

func isProjector(f string) bool {
	base := f[strings.LastIndexByte(f, '/')+1:]
	return strings.HasPrefix(strings.ToLower(base), "mmproj")
}

// quantRE finds a quantization type's name in a file name: ggml's types
// and llama.cpp's mixes (Q4_K_M, IQ2_XXS, Q4_0_4_4, BF16, MXFP4, TQ1_0),
// and unsloth's dynamic ones (UD-Q4_K_XL), as a whole component.
var quantRE = regexp.MustCompile(`(?i)(?:^|[-._/])((?:UD-)?(?:I?Q[1-8](?:_[0-9A-Z]+)*|TQ[12]_0|BF16|F16|F32|MXFP4(?:_MOE)?))(?:[-./]|$)`)

// QuantOf is the quantization a file's name says, upper case ("Q4_K_M"),
// or "" when it names none; the file's own header is the authority.
func QuantOf(file string) string {
	name := file
	if m := splitRE.FindStringIndex(name); m != nil {
		name = name[:m[0]]
	} else if isGGUF(name) {
		name = name[:len(name)-len(".gguf")]
	}
	all := quantRE.FindAllStringSubmatch(name, -1)
	if len(all) == 0 {
		return ""
	}
	return strings.ToUpper(all[len(all)-1][1])
}
