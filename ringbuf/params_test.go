package ringbuf

import (
	"go/ast"
	"go/parser"
	"go/token"
	"math"
	"math/rand/v2"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"

	"ringlm/sample"
)

// notTravelling lists the sample.Params fields that an OPEN_SLOT does not
// carry, and why; every other field must survive Put and Open.
var notTravelling = map[string]string{
	"StopStrings": "the engine matches stop strings on the decoded text",
}

// fullOpen sets every field of SlotOpen and of its Params (none at its
// zero value or its default, so that a field that is dropped or swapped
// shows) but those of notTravelling.
func fullOpen() SlotOpen {
	return SlotOpen{
		Params: sample.Params{
			Temperature:      0.7,
			TopK:             40,
			TopP:             0.95,
			MinP:             0.05,
			RepeatPenalty:    1.1,
			RepeatLastN:      -1,
			PresencePenalty:  0.5,
			FrequencyPenalty: -0.25,
			LogitBias:        map[int32]float32{5: -100, 1000: 2.5, 7: 0.125, 3: 100},
			Seed:             0xDEADBEEF_01234567,
			MaxTokens:        256,
			StopTokens:       []int32{13, 198, 2},
			Logprobs:         true,
			TopLogprobs:      MaxTop,
		},
		IgnoreEOS: true,
		EOS:       []int32{128001, 128008, 128009},
		StartPos:  48,
		PromptLen: 30,
		Hist:      []int32{1, 2, 3, 4, 5},
	}
}

// roundTrip encodes o and decodes the words.
func roundTrip(t *testing.T, o *SlotOpen) ([]uint32, SlotOpen) {
	t.Helper()
	w := make([]uint32, o.Words())
	for i := range w {
		w[i] = 0xFFFFFFFF // Put must write every word
	}
	if n := o.Put(w); n != len(w) {
		t.Fatalf("Put wrote %d words, Words says %d", n, len(w))
	}
	pl, err := ParseSlotPayload(w)
	if err != nil {
		t.Fatalf("ParseSlotPayload of Put's words: %v", err)
	}
	var got SlotOpen
	pl.Open(&got)
	return w, got
}

// TestSlotOpenRoundTrip: every field of sample.Params that travels (and
// every other field of SlotOpen) comes back from the words as it went in.
func TestSlotOpenRoundTrip(t *testing.T) {
	o := fullOpen()
	// A field added to sample.Params or SlotOpen must be set above (and
	// mapped in slotFields) or listed in notTravelling.
	for _, v := range []reflect.Value{reflect.ValueOf(o), reflect.ValueOf(o.Params)} {
		for i := range v.NumField() {
			f := v.Type().Field(i)
			if _, skip := notTravelling[f.Name]; !skip && v.Field(i).IsZero() {
				t.Errorf("%s.%s is not set in fullOpen: map it in slotFields and set it, or list it in notTravelling", v.Type(), f.Name)
			}
		}
	}
	want := o
	o.Params.StopStrings = []string{"never sent"}
	_, got := roundTrip(t, &o)
	if !reflect.DeepEqual(got, want) {
		t.Errorf("round trip:\n got  %+v\n want %+v", got, want)
	}
	gp, wp := reflect.ValueOf(got.Params), reflect.ValueOf(want.Params)
	for i := range gp.NumField() {
		if !reflect.DeepEqual(gp.Field(i).Interface(), wp.Field(i).Interface()) {
			t.Errorf("Params.%s: %v, want %v", gp.Type().Field(i).Name, gp.Field(i), wp.Field(i))
		}
	}

	// Zero values and the other flag combinations travel too.
	for _, o := range []SlotOpen{
		{Params: sample.Defaults()},
		{Params: sample.Params{TopP: 1, RepeatPenalty: 1, Logprobs: true}},
		{Params: sample.Params{TopP: 1, RepeatPenalty: 1}, IgnoreEOS: true, EOS: []int32{0}},
	} {
		if _, got := roundTrip(t, &o); !reflect.DeepEqual(got, o) {
			t.Errorf("round trip:\n got  %+v\n want %+v", got, o)
		}
	}
}

// TestSlotOpenRandom: random parameters round-trip, and Put writes the
// words of the hand mapping it replaced in engine/step.go (the wire
// format did not change).
func TestSlotOpenRandom(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for range 500 {
		o := SlotOpen{Params: sample.Params{
			Temperature:      rng.Float32() * 2,
			TopK:             rng.IntN(100),
			TopP:             rng.Float32(),
			MinP:             rng.Float32(),
			RepeatPenalty:    rng.Float32() * 2,
			RepeatLastN:      rng.IntN(200) - 1,
			PresencePenalty:  rng.Float32()*4 - 2,
			FrequencyPenalty: rng.Float32()*4 - 2,
			Seed:             rng.Uint64(),
			MaxTokens:        rng.IntN(5000),
			Logprobs:         rng.IntN(2) == 0,
		}, IgnoreEOS: rng.IntN(2) == 0, StartPos: rng.IntN(4096), PromptLen: rng.IntN(4096)}
		if o.Params.Logprobs {
			o.Params.TopLogprobs = rng.IntN(MaxTop + 1)
		}
		for range rng.IntN(MaxEOS + 1) {
			o.EOS = append(o.EOS, rng.Int32N(1<<17))
		}
		for range rng.IntN(20) {
			o.Params.StopTokens = append(o.Params.StopTokens, rng.Int32N(1<<17))
		}
		if n := rng.IntN(20); n > 0 {
			o.Params.LogitBias = map[int32]float32{}
			for range n {
				o.Params.LogitBias[rng.Int32N(1<<17)] = rng.Float32()*200 - 100
			}
		}
		for range rng.IntN(30) {
			o.Hist = append(o.Hist, rng.Int32N(1<<17))
		}
		w, got := roundTrip(t, &o)
		if !reflect.DeepEqual(got, o) {
			t.Fatalf("round trip:\n got  %+v\n want %+v", got, o)
		}
		if old := handMapped(&o); !slices.Equal(w, old) {
			t.Fatalf("Put wrote\n %v\nthe hand mapping\n %v", w, old)
		}
	}
}

// handMapped is the encoding engine/step.go did by hand before SlotOpen.
func handMapped(o *SlotOpen) []uint32 {
	p := &o.Params
	sp := SlotParams{Temperature: p.Temperature, TopP: p.TopP, MinP: p.MinP, TopK: uint32(p.TopK),
		RepeatPenalty: p.RepeatPenalty, RepeatLastN: int32(p.RepeatLastN), Presence: p.PresencePenalty,
		Frequency: p.FrequencyPenalty, Seed: p.Seed, MaxTokens: uint32(p.MaxTokens),
		StartPos: uint32(o.StartPos), PromptLen: uint32(o.PromptLen), NTop: uint32(p.TopLogprobs)}
	if p.Logprobs {
		sp.Flags |= SlotLogprobs
	}
	if o.IgnoreEOS {
		sp.Flags |= SlotIgnoreEOS
	}
	u32 := func(v []int32) []uint32 {
		var out []uint32
		for _, x := range v {
			out = append(out, uint32(x))
		}
		return out
	}
	sp.NEOS = uint32(copy(sp.EOS[:], u32(o.EOS)))
	var bias []TokenBias
	for id, b := range p.LogitBias {
		bias = append(bias, TokenBias{Token: uint32(id), Bias: b})
	}
	slices.SortFunc(bias, func(x, y TokenBias) int { return int(x.Token) - int(y.Token) })
	stop, hist := u32(p.StopTokens), u32(o.Hist)
	w := make([]uint32, SlotPayloadWords(len(stop), len(bias), len(hist)))
	PutSlotPayload(w, &sp, stop, bias, hist)
	return w
}

// TestSlotOpenClamps: integers beyond their word are clamped, never
// wrapped into another meaning (a top_k of 2^32+5 is not 5).
func TestSlotOpenClamps(t *testing.T) {
	if strconv.IntSize < 64 {
		t.Skip("int is 32 bits")
	}
	o := SlotOpen{Params: sample.Params{TopP: 1, RepeatPenalty: 1, TopK: 1<<32 + 5, RepeatLastN: 1<<31 + 7, MaxTokens: 1 << 40},
		StartPos: -3, PromptLen: 1<<32 + 1}
	w := make([]uint32, o.Words())
	o.Put(w)
	for _, c := range []struct {
		name string
		word int
		want uint32
	}{
		{"top_k", SPOffTopK, math.MaxUint32},
		{"repeat_last_n", SPOffRepeatLastN, math.MaxInt32},
		{"max_tokens", SPOffMaxTokens, math.MaxUint32},
		{"start_pos", SPOffStartPos, 0},
		{"prompt_len", SPOffPromptLen, math.MaxUint32},
	} {
		if w[c.word] != c.want {
			t.Errorf("%s: word %d is %#x, want %#x", c.name, c.word, w[c.word], c.want)
		}
	}
}

// paramErrorNames are the Param values of every sample.ParamError that
// package sample can produce: the first argument of its bad(...) calls
// and the Param of its ParamError literals.
func paramErrorNames(t *testing.T) []string {
	t.Helper()
	paths, err := filepath.Glob("../sample/*.go")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	var names []string
	str := func(e ast.Expr) {
		if bl, ok := e.(*ast.BasicLit); ok && bl.Kind == token.STRING {
			if s, err := strconv.Unquote(bl.Value); err == nil && !slices.Contains(names, s) {
				names = append(names, s)
			}
		}
	}
	for _, p := range paths {
		if strings.HasSuffix(p, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, p, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		ast.Inspect(f, func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.CallExpr:
				if id, ok := n.Fun.(*ast.Ident); ok && id.Name == "bad" && len(n.Args) > 0 {
					str(n.Args[0])
				}
			case *ast.KeyValueExpr:
				if id, ok := n.Key.(*ast.Ident); ok && id.Name == "Param" {
					str(n.Value)
				}
			}
			return true
		})
	}
	if len(names) < 10 {
		t.Fatalf("found only %v in package sample's ParamErrors", names)
	}
	return names
}

// TestParamWordCoversParamErrors: every parameter a sample.ParamError can
// name maps to the word it travels in; only "stop" (the stop strings,
// which do not travel) maps to none.
func TestParamWordCoversParamErrors(t *testing.T) {
	want := map[string]uint32{
		"temperature":       SPOffTemperature,
		"top_k":             SPOffTopK,
		"top_p":             SPOffTopP,
		"min_p":             SPOffMinP,
		"repeat_penalty":    SPOffRepeatPenalty,
		"repeat_last_n":     SPOffRepeatLastN,
		"presence_penalty":  SPOffPresence,
		"frequency_penalty": SPOffFrequency,
		"max_tokens":        SPOffMaxTokens,
		"top_logprobs":      SPOffNTop,
		"stop_tokens":       SlotParamsWords,     // the first stop id (none is bad here)
		"logit_bias":        SlotParamsWords + 3, // the first pair, after the 3 stop ids
	}
	o := fullOpen()
	w := make([]uint32, o.Words())
	o.Put(w)
	pl, err := ParseSlotPayload(w)
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range paramErrorNames(t) {
		word, ok := pl.ParamWord(&sample.ParamError{Param: name}, 1<<20)
		if name == "stop" {
			if ok {
				t.Errorf("%q (stop strings do not travel) maps to word %d", name, word)
			}
			continue
		}
		w, known := want[name]
		switch {
		case !ok:
			t.Errorf("sample.ParamError %q maps to no payload word", name)
		case !known:
			t.Errorf("sample.ParamError %q maps to word %d: add it to this test", name, word)
		case word != w:
			t.Errorf("sample.ParamError %q maps to word %d, want %d", name, word, w)
		}
	}
	if _, ok := pl.ParamWord(nil, 10); ok {
		t.Error("a nil error maps to a word")
	}
}

// TestParamWordFromValidation: the words that sample.Params.Validate's
// first error is located at, for parameters that travel and are out of
// range, decoded from the words as a Go device does.
func TestParamWordFromValidation(t *testing.T) {
	const vocab = 100
	base := func() SlotOpen {
		return SlotOpen{Params: sample.Params{Temperature: 1, TopP: 1, RepeatPenalty: 1, RepeatLastN: 64,
			StopTokens: []int32{4, 5}}}
	}
	stop0 := uint32(SlotParamsWords)
	bias0 := stop0 + 2 // after the two stop ids of base
	for _, c := range []struct {
		name string
		set  func(p *sample.Params)
		word uint32
	}{
		{"temperature", func(p *sample.Params) { p.Temperature = -1 }, SPOffTemperature},
		{"top_p", func(p *sample.Params) { p.TopP = 0 }, SPOffTopP},
		{"min_p", func(p *sample.Params) { p.MinP = 1.5 }, SPOffMinP},
		{"repeat_penalty", func(p *sample.Params) { p.RepeatPenalty = float32(math.Inf(1)) }, SPOffRepeatPenalty},
		{"repeat_last_n", func(p *sample.Params) { p.RepeatLastN = -2 }, SPOffRepeatLastN},
		{"presence", func(p *sample.Params) { p.PresencePenalty = 2.5 }, SPOffPresence},
		{"frequency", func(p *sample.Params) { p.FrequencyPenalty = -3 }, SPOffFrequency},
		{"stop id", func(p *sample.Params) { p.StopTokens = []int32{4, vocab, 5} }, stop0 + 1},
		// Pairs go in token order: 2, 3, vocab.
		{"bias token", func(p *sample.Params) { p.LogitBias = map[int32]float32{3: 1, vocab: 1, 2: 1} }, bias0 + 2*2},
		{"bias value", func(p *sample.Params) { p.LogitBias = map[int32]float32{3: 101, 2: 1} }, bias0 + 2*1 + 1},
		{"first error wins", func(p *sample.Params) { p.TopP, p.PresencePenalty = 2, 3 }, SPOffTopP},
	} {
		o := base()
		c.set(&o.Params)
		w := make([]uint32, o.Words())
		o.Put(w)
		pl, err := ParseSlotPayload(w)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		var got SlotOpen
		pl.Open(&got)
		err = got.Params.Validate(vocab)
		if err == nil {
			t.Fatalf("%s: valid", c.name)
		}
		if word, ok := pl.ParamWord(err, vocab); !ok || word != c.word {
			t.Errorf("%s (%v): word %d (%v), want %d", c.name, err, word, ok, c.word)
		}
	}
}
