// Package cheader writes kernels/cuda/ring.h, the C/CUDA view of the ring
// protocol, from package ringbuf: every exported constant of ringbuf becomes
// a macro (value from the compiled package, comment from its source), and
// the record structs are laid out from the offset constants, with
// static_asserts that check the C compiler agrees. Generate refuses to run
// if ringbuf gains a constant that the header does not carry, so the two
// sides cannot drift.
package cheader

import (
	"bytes"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"unicode"

	"ringlm/ringbuf"
)

type konst struct {
	name string // Go name in package ringbuf
	v    uint64
}

func k[T ~uint32 | ~uint64 | ~int](name string, v T) konst { return konst{name, uint64(v)} }

type group struct {
	title  string
	consts []konst
}

// groups lists every exported constant of ringbuf, in header order.
var groups = []group{
	{"Arena header", []konst{
		k("Magic", ringbuf.Magic), k("Version", ringbuf.Version), k("Align", ringbuf.Align),
		k("HeaderSize", ringbuf.HeaderSize),
		k("HdrOffMagic", ringbuf.HdrOffMagic), k("HdrOffVersion", ringbuf.HdrOffVersion),
		k("HdrOffHeaderSize", ringbuf.HdrOffHeaderSize),
		k("HdrOffSubmitOff", ringbuf.HdrOffSubmitOff), k("HdrOffSubmitCap", ringbuf.HdrOffSubmitCap),
		k("HdrOffSubmitRecSize", ringbuf.HdrOffSubmitRecSize),
		k("HdrOffComplOff", ringbuf.HdrOffComplOff), k("HdrOffComplCap", ringbuf.HdrOffComplCap),
		k("HdrOffComplRecSize", ringbuf.HdrOffComplRecSize),
		k("HdrOffStagingOff", ringbuf.HdrOffStagingOff), k("HdrOffStagingWords", ringbuf.HdrOffStagingWords),
		k("HdrOffTotalSize", ringbuf.HdrOffTotalSize),
	}},
	{"Ring control block", []konst{
		k("RingOffProd", ringbuf.RingOffProd), k("RingOffCons", ringbuf.RingOffCons),
		k("RingOffRecords", ringbuf.RingOffRecords),
	}},
	{"Layout limits", []konst{
		k("MinCap", ringbuf.MinCap), k("MaxCap", ringbuf.MaxCap),
		k("MinStagingWords", ringbuf.MinStagingWords), k("MaxStagingWords", ringbuf.MaxStagingWords),
	}},
	{"Submit ops", []konst{
		k("OpOpenSlot", ringbuf.OpOpenSlot), k("OpGrantBlocks", ringbuf.OpGrantBlocks),
		k("OpStep", ringbuf.OpStep), k("OpCloseSlot", ringbuf.OpCloseSlot), k("OpStop", ringbuf.OpStop),
	}},
	{"Submit record", []konst{
		k("SubmitSize", ringbuf.SubmitSize),
		k("SubOffOp", ringbuf.SubOffOp), k("SubOffSlot", ringbuf.SubOffSlot), k("SubOffID", ringbuf.SubOffID),
		k("SubOffPayloadOff", ringbuf.SubOffPayloadOff), k("SubOffPayloadLen", ringbuf.SubOffPayloadLen),
		k("SubOffGrantFirst", ringbuf.SubOffGrantFirst), k("SubOffGrantCount", ringbuf.SubOffGrantCount),
		k("SubOffStepTokens", ringbuf.SubOffStepTokens), k("SubOffStepSample", ringbuf.SubOffStepSample),
	}},
	{"Completion kinds", []konst{
		k("KindToken", ringbuf.KindToken), k("KindStepDone", ringbuf.KindStepDone),
		k("KindError", ringbuf.KindError), k("KindSlotClosed", ringbuf.KindSlotClosed),
		k("KindStopped", ringbuf.KindStopped), k("KindSkipped", ringbuf.KindSkipped),
		k("KindTopLogprobs", ringbuf.KindTopLogprobs),
	}},
	{"Finish reasons (TOKEN)", []konst{
		k("FinishNone", ringbuf.FinishNone), k("FinishStop", ringbuf.FinishStop),
		k("FinishLength", ringbuf.FinishLength),
	}},
	{"Error codes (ERROR)", []konst{
		k("CodeBadOp", ringbuf.CodeBadOp), k("CodeBadSlot", ringbuf.CodeBadSlot),
		k("CodeSlotState", ringbuf.CodeSlotState), k("CodeBadPayload", ringbuf.CodeBadPayload),
		k("CodeNoBlock", ringbuf.CodeNoBlock), k("CodeBadToken", ringbuf.CodeBadToken),
		k("CodeBadParams", ringbuf.CodeBadParams), k("CodeNoFeedback", ringbuf.CodeNoFeedback),
		k("CodeDevice", ringbuf.CodeDevice), k("CodeNonFinite", ringbuf.CodeNonFinite),
		k("NoSlot", uint64(ringbuf.NoSlot)),
	}},
	{"Completion record", []konst{
		k("CompletionSize", ringbuf.CompletionSize),
		k("ComOffKind", ringbuf.ComOffKind), k("ComOffSlot", ringbuf.ComOffSlot), k("ComOffStep", ringbuf.ComOffStep),
		k("ComOffToken", ringbuf.ComOffToken), k("ComOffLogprob", ringbuf.ComOffLogprob),
		k("ComOffFinish", ringbuf.ComOffFinish), k("ComOffPosition", ringbuf.ComOffPosition),
		k("ComOffStartNS", ringbuf.ComOffStartNS), k("ComOffEndNS", ringbuf.ComOffEndNS),
		k("ComOffCode", ringbuf.ComOffCode), k("ComOffDetail", ringbuf.ComOffDetail),
		k("ComOffTopToken0", ringbuf.ComOffTopToken0), k("ComOffTopLogprob0", ringbuf.ComOffTopLogprob0),
		k("ComOffTopToken1", ringbuf.ComOffTopToken1), k("ComOffTopLogprob1", ringbuf.ComOffTopLogprob1),
		k("TopPerRecord", ringbuf.TopPerRecord), k("TopNone", uint64(ringbuf.TopNone)),
	}},
	{"STEP payload entries (word offsets)", []konst{
		k("StepEntryWords", ringbuf.StepEntryWords),
		k("EntOffSlot", ringbuf.EntOffSlot), k("EntOffNTokens", ringbuf.EntOffNTokens),
		k("EntOffTokenOff", ringbuf.EntOffTokenOff), k("EntOffFlags", ringbuf.EntOffFlags),
		k("TokenOffFeedback", uint64(ringbuf.TokenOffFeedback)),
		k("EntrySample", ringbuf.EntrySample), k("EntryLogitsAll", ringbuf.EntryLogitsAll),
	}},
	{"OPEN_SLOT payload (word offsets)", []konst{
		k("SlotParamsWords", ringbuf.SlotParamsWords), k("MaxEOS", ringbuf.MaxEOS),
		k("SPOffTemperature", ringbuf.SPOffTemperature), k("SPOffTopP", ringbuf.SPOffTopP),
		k("SPOffMinP", ringbuf.SPOffMinP), k("SPOffTopK", ringbuf.SPOffTopK),
		k("SPOffRepeatPenalty", ringbuf.SPOffRepeatPenalty), k("SPOffRepeatLastN", ringbuf.SPOffRepeatLastN),
		k("SPOffPresence", ringbuf.SPOffPresence), k("SPOffFrequency", ringbuf.SPOffFrequency),
		k("SPOffSeedLo", ringbuf.SPOffSeedLo), k("SPOffSeedHi", ringbuf.SPOffSeedHi),
		k("SPOffMaxTokens", ringbuf.SPOffMaxTokens), k("SPOffStartPos", ringbuf.SPOffStartPos),
		k("SPOffNStop", ringbuf.SPOffNStop), k("SPOffNBias", ringbuf.SPOffNBias),
		k("SPOffFlags", ringbuf.SPOffFlags), k("SPOffNHist", ringbuf.SPOffNHist),
		k("SPOffNEOS", ringbuf.SPOffNEOS), k("SPOffEOS", ringbuf.SPOffEOS), k("SPOffPromptLen", ringbuf.SPOffPromptLen),
		k("SPOffNTop", ringbuf.SPOffNTop), k("MaxTop", ringbuf.MaxTop),
		k("SlotLogprobs", ringbuf.SlotLogprobs), k("SlotIgnoreEOS", ringbuf.SlotIgnoreEOS),
		k("SlotFlagsKnown", ringbuf.SlotFlagsKnown),
	}},
	{"Device limits", []konst{
		k("MaxStop", ringbuf.MaxStop), k("MaxBias", ringbuf.MaxBias), k("MaxHeadDim", ringbuf.MaxHeadDim),
	}},
}

// field is one struct member; off names the ringbuf constant holding its
// offset (in the struct's unit, from the struct's base).
type field struct {
	name  string // C name; "" derives it from off
	ctype string
	off   string
	n     string // constant holding the array length; "" for a scalar
}

// union is a member of a struct that overlays several variant structs.
type union struct {
	name     string
	off      string
	variants []variant
}

type variant struct {
	name  string
	ctype string
}

type cstruct struct {
	name   string
	doc    string
	size   string // constant holding the size, in unit
	unit   int    // 1: byte offsets, 4: word offsets
	base   string // constant subtracted from every offset ("" for none)
	fields []field
	union  *union // placed at union.off after the fields
}

var structs = []cstruct{
	{name: "rlm_header", doc: "The arena header, at offset 0.", size: "HeaderSize", unit: 1, fields: []field{
		{ctype: "uint64_t", off: "HdrOffMagic"},
		{ctype: "uint32_t", off: "HdrOffVersion"},
		{ctype: "uint32_t", off: "HdrOffHeaderSize"},
		{ctype: "uint64_t", off: "HdrOffSubmitOff"},
		{ctype: "uint32_t", off: "HdrOffSubmitCap"},
		{ctype: "uint32_t", off: "HdrOffSubmitRecSize"},
		{ctype: "uint64_t", off: "HdrOffComplOff"},
		{ctype: "uint32_t", off: "HdrOffComplCap"},
		{ctype: "uint32_t", off: "HdrOffComplRecSize"},
		{ctype: "uint64_t", off: "HdrOffStagingOff"},
		{ctype: "uint32_t", off: "HdrOffStagingWords"},
		{ctype: "uint64_t", off: "HdrOffTotalSize"},
	}},
	{name: "rlm_ring_ctl", doc: "A ring's control block; its records follow at RLM_RING_OFF_RECORDS.", size: "RingOffRecords", unit: 1, fields: []field{
		{ctype: "uint64_t", off: "RingOffProd"},
		{ctype: "uint64_t", off: "RingOffCons"},
	}},
	{name: "rlm_submit", doc: "A submit record (host -> device).", size: "SubmitSize", unit: 1, fields: []field{
		{ctype: "uint32_t", off: "SubOffOp"},
		{ctype: "uint32_t", off: "SubOffSlot"},
		{ctype: "uint64_t", off: "SubOffID"},
		{ctype: "uint32_t", off: "SubOffPayloadOff"},
		{ctype: "uint32_t", off: "SubOffPayloadLen"},
		{ctype: "uint32_t", off: "SubOffGrantFirst"},
		{ctype: "uint32_t", off: "SubOffGrantCount"},
		{ctype: "uint32_t", off: "SubOffStepTokens"},
		{ctype: "uint32_t", off: "SubOffStepSample"},
	}},
	{name: "rlm_token", doc: "TOKEN fields of a completion (its bytes 16..31).", size: "CompletionSize", unit: 1, base: "ComOffToken", fields: []field{
		{ctype: "uint32_t", off: "ComOffToken"},
		{ctype: "float", off: "ComOffLogprob"},
		{ctype: "uint32_t", off: "ComOffFinish"},
		{ctype: "uint32_t", off: "ComOffPosition"},
	}},
	{name: "rlm_step_done", doc: "STEP_DONE fields of a completion (its bytes 16..31).", size: "CompletionSize", unit: 1, base: "ComOffStartNS", fields: []field{
		{ctype: "uint64_t", off: "ComOffStartNS"},
		{ctype: "uint64_t", off: "ComOffEndNS"},
	}},
	{name: "rlm_error", doc: "ERROR fields of a completion (its bytes 16..31).", size: "CompletionSize", unit: 1, base: "ComOffCode", fields: []field{
		{ctype: "uint32_t", off: "ComOffCode"},
		{ctype: "uint32_t", off: "ComOffDetail"},
	}},
	{name: "rlm_top_logprobs", doc: "TOP_LOGPROBS fields of a completion (its bytes 16..31): two alternatives.", size: "CompletionSize", unit: 1, base: "ComOffTopToken0", fields: []field{
		{ctype: "uint32_t", off: "ComOffTopToken0", name: "token0"},
		{ctype: "float", off: "ComOffTopLogprob0", name: "logprob0"},
		{ctype: "uint32_t", off: "ComOffTopToken1", name: "token1"},
		{ctype: "float", off: "ComOffTopLogprob1", name: "logprob1"},
	}},
	{name: "rlm_completion", doc: "A completion record (device -> host).", size: "CompletionSize", unit: 1, fields: []field{
		{ctype: "uint32_t", off: "ComOffKind"},
		{ctype: "uint32_t", off: "ComOffSlot"},
		{ctype: "uint64_t", off: "ComOffStep"},
	}, union: &union{name: "u", off: "ComOffToken", variants: []variant{
		{"token", "rlm_token"}, {"step_done", "rlm_step_done"}, {"err", "rlm_error"}, {"top", "rlm_top_logprobs"},
	}}},
	{name: "rlm_step_entry", doc: "One entry of a STEP payload (staging words).", size: "StepEntryWords", unit: 4, fields: []field{
		{ctype: "uint32_t", off: "EntOffSlot"},
		{ctype: "uint32_t", off: "EntOffNTokens"},
		{ctype: "uint32_t", off: "EntOffTokenOff"},
		{ctype: "uint32_t", off: "EntOffFlags"},
	}},
	{name: "rlm_slot_params", doc: "The fixed block of an OPEN_SLOT payload (staging words, so only 4-byte aligned:\n * the seed is two words). n_stop stop ids, n_bias (token, f32 bias) pairs and\n * n_hist history tokens follow it.", size: "SlotParamsWords", unit: 4, fields: []field{
		{ctype: "float", off: "SPOffTemperature"},
		{ctype: "float", off: "SPOffTopP"},
		{ctype: "float", off: "SPOffMinP"},
		{ctype: "uint32_t", off: "SPOffTopK"},
		{ctype: "float", off: "SPOffRepeatPenalty"},
		{ctype: "int32_t", off: "SPOffRepeatLastN"},
		{ctype: "float", off: "SPOffPresence"},
		{ctype: "float", off: "SPOffFrequency"},
		{ctype: "uint32_t", off: "SPOffSeedLo"},
		{ctype: "uint32_t", off: "SPOffSeedHi"},
		{ctype: "uint32_t", off: "SPOffMaxTokens"},
		{ctype: "uint32_t", off: "SPOffStartPos"},
		{ctype: "uint32_t", off: "SPOffNStop", name: "n_stop"},
		{ctype: "uint32_t", off: "SPOffNBias", name: "n_bias"},
		{ctype: "uint32_t", off: "SPOffFlags"},
		{ctype: "uint32_t", off: "SPOffNHist", name: "n_hist"},
		{ctype: "uint32_t", off: "SPOffNEOS", name: "n_eos"},
		{ctype: "uint32_t", off: "SPOffEOS", n: "MaxEOS"},
		{ctype: "uint32_t", off: "SPOffPromptLen"},
		{ctype: "uint32_t", off: "SPOffNTop", name: "n_top"},
	}},
}

var ctypeSize = map[string]int{"uint32_t": 4, "int32_t": 4, "float": 4, "uint64_t": 8}

// MacroName is the C macro of a ringbuf constant: RLM_ and the Go name in
// upper snake case (SubOffPayloadLen -> RLM_SUB_OFF_PAYLOAD_LEN).
func MacroName(goName string) string {
	if m, ok := macroOverride[goName]; ok {
		return m
	}
	return "RLM_" + strings.ToUpper(snake(goName))
}

// macroOverride names the macros whose Go name does not split well.
var macroOverride = map[string]string{"SPOffNEOS": "RLM_SP_OFF_N_EOS"}

// snake splits a Go identifier into lower-case words: a new word starts at
// an upper-case letter after a lower-case one or a digit, and at the last
// capital of an acronym followed by a lower-case letter (StartNS -> start_ns,
// SPOffTopP -> sp_off_top_p, NTokens -> n_tokens).
func snake(s string) string {
	r := []rune(s)
	var b strings.Builder
	for i, c := range r {
		if i > 0 && unicode.IsUpper(c) {
			prev := r[i-1]
			nextLower := i+1 < len(r) && unicode.IsLower(r[i+1])
			if unicode.IsLower(prev) || unicode.IsDigit(prev) || (unicode.IsUpper(prev) && nextLower) {
				b.WriteByte('_')
			}
		}
		b.WriteRune(unicode.ToLower(c))
	}
	return b.String()
}

// docs holds what the Go source says about each constant.
type docs struct {
	doc   map[string]string // doc comment of the constant
	line  map[string]string // line comment of the constant
	block map[string]string // doc comment of the const block holding it
	lit   map[string]string // the constant's expression, when it is a basic literal
	names []string          // every exported constant, in source order
}

func readDocs(srcDir string) (*docs, error) {
	fset := token.NewFileSet()
	paths, err := filepath.Glob(filepath.Join(srcDir, "*.go"))
	if err != nil {
		return nil, err
	}
	sort.Strings(paths)
	d := &docs{doc: map[string]string{}, line: map[string]string{}, block: map[string]string{}, lit: map[string]string{}}
	n := 0
	for _, p := range paths {
		if strings.HasSuffix(p, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, p, nil, parser.ParseComments)
		if err != nil {
			return nil, err
		}
		if f.Name.Name != "ringbuf" {
			continue
		}
		n++
		for _, decl := range f.Decls {
			gd, ok := decl.(*ast.GenDecl)
			if !ok || gd.Tok != token.CONST {
				continue
			}
			for _, s := range gd.Specs {
				vs := s.(*ast.ValueSpec)
				for i, id := range vs.Names {
					if !id.IsExported() {
						continue
					}
					d.names = append(d.names, id.Name)
					if vs.Doc != nil {
						d.doc[id.Name] = strings.TrimSpace(vs.Doc.Text())
					} else if len(gd.Specs) == 1 && gd.Doc != nil {
						d.doc[id.Name] = strings.TrimSpace(gd.Doc.Text())
					}
					if vs.Comment != nil {
						d.line[id.Name] = strings.Join(strings.Fields(vs.Comment.Text()), " ")
					}
					if gd.Doc != nil && len(gd.Specs) > 1 {
						d.block[id.Name] = strings.TrimSpace(gd.Doc.Text())
					}
					if i < len(vs.Values) {
						if bl, ok := vs.Values[i].(*ast.BasicLit); ok {
							d.lit[id.Name] = bl.Value
						}
					}
				}
			}
		}
	}
	if n == 0 {
		return nil, fmt.Errorf("cheader: no Go files of package ringbuf in %s", srcDir)
	}
	return d, nil
}

// Generate returns ring.h for the ringbuf sources in srcDir (for the
// comments and the completeness check; values come from the compiled
// package).
func Generate(srcDir string) ([]byte, error) {
	d, err := readDocs(srcDir)
	if err != nil {
		return nil, err
	}
	vals := map[string]uint64{}
	for _, g := range groups {
		for _, c := range g.consts {
			if _, dup := vals[c.name]; dup {
				return nil, fmt.Errorf("cheader: constant %s listed twice", c.name)
			}
			vals[c.name] = c.v
		}
	}
	// Every exported constant must be in the header, and every listed
	// name must be a constant whose literal (if it is one) is the value.
	var missing []string
	for _, n := range d.names {
		if _, ok := vals[n]; !ok {
			missing = append(missing, n)
		}
	}
	if len(missing) > 0 {
		return nil, fmt.Errorf("cheader: ringbuf constants missing from the header table: %s", strings.Join(missing, ", "))
	}
	for n, v := range vals {
		if !slices.Contains(d.names, n) {
			return nil, fmt.Errorf("cheader: %s is not an exported constant of ringbuf", n)
		}
		if lit, ok := d.lit[n]; ok {
			if x, err := strconv.ParseUint(lit, 0, 64); err == nil && x != v {
				return nil, fmt.Errorf("cheader: %s is %s in the source but the table holds %d", n, lit, v)
			}
		}
	}

	var b bytes.Buffer
	b.WriteString(prologue)
	for _, g := range groups {
		fmt.Fprintf(&b, "\n/* ---- %s ---- */\n", g.title)
		lastBlock := ""
		width := 0
		for _, c := range g.consts {
			width = max(width, len(MacroName(c.name))+1+len(literal(c.v)))
		}
		for _, c := range g.consts {
			if bd := d.block[c.name]; bd != "" && bd != lastBlock {
				writeComment(&b, bd, "")
				lastBlock = bd
			}
			if sd := d.doc[c.name]; sd != "" {
				writeComment(&b, sd, "")
			}
			def := MacroName(c.name) + " " + literal(c.v)
			if lc := d.line[c.name]; lc != "" {
				fmt.Fprintf(&b, "#define %-*s /* %s */\n", width, def, strings.ReplaceAll(lc, "*/", "* /"))
			} else {
				fmt.Fprintf(&b, "#define %s\n", def)
			}
		}
	}
	b.WriteString("\n/* ---- Structs ----\n * Naturally aligned, with explicit padding: no compiler inserts any (the\n * static_asserts prove it), and no packed attribute forces byte-wise loads\n * on the GPU.\n */\n")
	for _, s := range structs {
		if err := writeStruct(&b, s, vals); err != nil {
			return nil, err
		}
	}
	b.WriteString(epilogue)
	return b.Bytes(), nil
}

func literal(v uint64) string {
	switch {
	case v > 0xFFFFFFFF:
		return fmt.Sprintf("0x%016Xull", v)
	case v >= 0x10000:
		if v&(v-1) == 0 {
			return fmt.Sprintf("%du", v)
		}
		return fmt.Sprintf("0x%Xu", v)
	}
	return fmt.Sprintf("%du", v)
}

func writeComment(b *bytes.Buffer, text, indent string) {
	text = strings.ReplaceAll(text, "*/", "* /")
	lines := strings.Split(text, "\n")
	if len(lines) == 1 && len(indent)+len(lines[0]) <= 74 {
		fmt.Fprintf(b, "%s/* %s */\n", indent, lines[0])
		return
	}
	fmt.Fprintf(b, "%s/*\n", indent)
	for _, l := range lines {
		if l == "" {
			fmt.Fprintf(b, "%s *\n", indent)
		} else {
			fmt.Fprintf(b, "%s * %s\n", indent, l)
		}
	}
	fmt.Fprintf(b, "%s */\n", indent)
}

// writeStruct emits s with explicit padding and the static_asserts that
// pin its size and every member's offset to the macros.
func writeStruct(b *bytes.Buffer, s cstruct, vals map[string]uint64) error {
	val := func(name string) (int, error) {
		v, ok := vals[name]
		if !ok {
			return 0, fmt.Errorf("cheader: struct %s: unknown constant %s", s.name, name)
		}
		return int(v), nil
	}
	base := 0
	baseExpr := ""
	if s.base != "" {
		v, err := val(s.base)
		if err != nil {
			return err
		}
		base, baseExpr = v, " - "+MacroName(s.base)
	}
	sizeV, err := val(s.size)
	if err != nil {
		return err
	}
	size := sizeV*s.unit - base
	scale := func(m string) string {
		if s.unit == 1 {
			return m
		}
		return strconv.Itoa(s.unit) + " * " + m
	}

	type member struct {
		decl   string
		off    int
		size   int
		align  int
		assert string // offset expression, "" for padding
		cname  string
	}
	var ms []member
	for _, f := range s.fields {
		o, err := val(f.off)
		if err != nil {
			return err
		}
		sz, ok := ctypeSize[f.ctype]
		if !ok {
			return fmt.Errorf("cheader: %s.%s: unknown C type %s", s.name, f.off, f.ctype)
		}
		name := f.name
		if name == "" {
			name = snake(f.off[strings.Index(f.off, "Off")+3:])
		}
		decl := fmt.Sprintf("%s %s", f.ctype, name)
		n := 1
		if f.n != "" {
			if n, err = val(f.n); err != nil {
				return err
			}
			decl += "[" + MacroName(f.n) + "]"
		}
		ms = append(ms, member{decl: decl, off: o*s.unit - base, size: sz * n, align: sz,
			assert: scale(MacroName(f.off)) + baseExpr, cname: name})
	}
	if u := s.union; u != nil {
		o, err := val(u.off)
		if err != nil {
			return err
		}
		o = o*s.unit - base
		var vs []string
		for _, v := range u.variants {
			vs = append(vs, fmt.Sprintf("%s %s;", v.ctype, v.name))
		}
		ms = append(ms, member{decl: "union { " + strings.Join(vs, " ") + " } " + u.name, off: o, size: size - o,
			align: 8, assert: scale(MacroName(u.off)), cname: u.name})
	}
	// Check the layout before writing it: ascending, aligned, inside.
	end := 0
	for _, m := range ms {
		if m.off < end {
			return fmt.Errorf("cheader: %s.%s at %d overlaps the previous member (ends at %d)", s.name, m.cname, m.off, end)
		}
		if m.off%m.align != 0 {
			return fmt.Errorf("cheader: %s.%s at %d is not %d-byte aligned", s.name, m.cname, m.off, m.align)
		}
		end = m.off + m.size
	}
	if end > size {
		return fmt.Errorf("cheader: %s members end at %d, past its size %d", s.name, end, size)
	}

	type line struct{ decl, comment string }
	var lines []line
	pos := 0
	for _, m := range ms {
		if m.off > pos {
			lines = append(lines, line{fmt.Sprintf("uint8_t _pad%d[%d];", pos, m.off-pos), "padding, zero"})
		}
		lines = append(lines, line{m.decl + ";", fmt.Sprintf("@%d", m.off)})
		pos = m.off + m.size
	}
	if size > pos {
		lines = append(lines, line{fmt.Sprintf("uint8_t _pad%d[%d];", pos, size-pos), "reserved, zero"})
	}
	width := 0
	for _, l := range lines {
		width = max(width, len(l.decl))
	}
	fmt.Fprintf(b, "\n/* %s */\ntypedef struct %s {\n", s.doc, s.name)
	for _, l := range lines {
		fmt.Fprintf(b, "    %-*s /* %s */\n", width, l.decl, l.comment)
	}
	fmt.Fprintf(b, "} %s;\n", s.name)
	fmt.Fprintf(b, "RLM_STATIC_ASSERT(sizeof(%s) == %s%s, \"%s size\");\n", s.name, scale(MacroName(s.size)), baseExpr, s.name)
	for _, m := range ms {
		fmt.Fprintf(b, "RLM_STATIC_ASSERT(offsetof(%s, %s) == %s, \"%s.%s offset\");\n", s.name, m.cname, m.assert, s.name, m.cname)
	}
	return nil
}

// WriteFile regenerates path from the sources in srcDir.
func WriteFile(srcDir, path string) error {
	h, err := Generate(srcDir)
	if err != nil {
		return err
	}
	return os.WriteFile(path, h, 0o644)
}
