package runner

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/rs/zerolog"

	"ringlm/chat"
	"ringlm/engine"
	"ringlm/gguf"
	"ringlm/internal/testmodel"
	"ringlm/kernels/cuda"
	"ringlm/model"
	"ringlm/models"
	"ringlm/ringbuf"
)

func TestMain(m *testing.M) {
	code := m.Run()
	testmodel.Cleanup()
	os.Exit(code)
}

// tinyModel is the tiny llama shape with synth's built-in 512-token
// vocabulary (ChatML template), written once per test binary.
func tinyModel(t testing.TB) string { return testmodel.Path(t, "llama", gguf.TypeF16) }

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func TestCheckDevice(t *testing.T) {
	for _, d := range []string{"", "auto", "cpu", "cuda"} {
		if err := CheckDevice(d); err != nil {
			t.Errorf("%q: %v", d, err)
		}
	}
	if err := CheckDevice("gpu"); err == nil || !strings.Contains(err.Error(), "--device") {
		t.Errorf("gpu: %v", err)
	}
	o := Options{Device: "cuda", KVType: "f32"}
	if err := o.Check(); err == nil || !strings.Contains(err.Error(), "f16") {
		t.Errorf("cuda with an f32 KV cache: %v", err)
	}
	o = Options{Device: "tpu"}
	if err := o.Check(); err == nil {
		t.Error("--device tpu accepted")
	}
	o = Options{KVType: "q8_0"}
	if err := o.Check(); err == nil || !strings.Contains(err.Error(), "--kv-type") {
		t.Errorf("--kv-type q8_0: %v", err)
	}
	for _, o := range []Options{{}, {Device: "cpu", KVType: "f32"}, {Device: "auto", KVType: "f32"}} {
		if err := o.Check(); err != nil {
			t.Errorf("%+v: %v", o, err)
		}
	}
}

func loadWith(t *testing.T, device string) (*Runner, string, error) {
	t.Helper()
	logs := &syncBuffer{}
	r, err := Load(tinyModel(t), Options{Device: device, Slots: 8, KVBlocks: 256, Allocator: ringbuf.HeapAllocator{}, Log: zerolog.New(logs)})
	if r != nil {
		t.Cleanup(func() { r.Close() })
	}
	return r, logs.String(), err
}

func TestLoadDevice(t *testing.T) {
	r, _, err := loadWith(t, "cpu")
	if err != nil || r.Engine.DeviceName() != "cpu" || r.Device != "cpu" {
		t.Fatalf("--device cpu: %v", err)
	}
	cpuFP := r.Fingerprint
	// 256 blocks (loadWith) of f16 K and V: what ps reports beside the weights.
	if want := 256 * model.KVBytesPerBlock(&r.Model.Config, gguf.TypeF16, model.DefaultBlockSize); r.KVBytes != want || want <= 0 {
		t.Errorf("KVBytes %d, want %d", r.KVBytes, want)
	}

	avail := cuda.Available()
	r, logs, err := loadWith(t, "auto")
	if err != nil {
		t.Fatal(err)
	}
	if avail != nil {
		if r.Engine.DeviceName() != "cpu" || !strings.Contains(logs, "device auto") || !strings.Contains(logs, "not usable") {
			t.Errorf("auto without CUDA: device %s, logs %s", r.Engine.DeviceName(), logs)
		}
		if r.Fingerprint != cpuFP {
			t.Error("fingerprint differs between auto (on the CPU) and cpu")
		}
		// --device cuda without a library is one clear line.
		_, _, err := loadWith(t, "cuda")
		if err == nil {
			t.Fatal("--device cuda loaded without CUDA")
		}
		msg := err.Error()
		if !strings.HasPrefix(msg, "--device cuda is not usable: "+avail.Error()) || strings.Contains(msg, "\n") ||
			(errors.Is(avail, cuda.ErrNoLibrary) && !strings.Contains(msg, "make cuda")) {
			t.Errorf("--device cuda without CUDA: %q", msg)
		}
		return
	}
	if !strings.HasPrefix(r.Engine.DeviceName(), "cuda (") || r.Device != "cuda" || r.Fingerprint == cpuFP {
		t.Errorf("auto with CUDA: device %s, fingerprint %s (cpu %s)", r.Engine.DeviceName(), r.Fingerprint, cpuFP)
	}
}

// The names a model answers to: an explicit one first, then general.name
// and the file's names; the built-in model is known by its own name.
func TestNames(t *testing.T) {
	o := Options{Device: "cpu", KVBlocks: 16, Allocator: ringbuf.HeapAllocator{}, Log: zerolog.Nop()}
	r, err := Load(tinyModel(t), o)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	general, _ := r.File.String("general.name")
	if want := []string{"tiny-test", "tiny-test.gguf"}; general != "" {
		if r.Name != general || strings.Join(r.Aliases, ",") != strings.Join(want, ",") {
			t.Errorf("name %q, aliases %q (general.name %q)", r.Name, r.Aliases, general)
		}
	} else if r.Name != "tiny-test" || strings.Join(r.Aliases, ",") != "tiny-test.gguf" {
		t.Errorf("name %q, aliases %q", r.Name, r.Aliases)
	}
	if r.ChatErr == nil && r.Chat == nil {
		t.Error("neither a chat template nor why not")
	}

	o.Name = "mine"
	b, err := Load("", o)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if b.Name != "mine" || b.Weights.Path != "" || !strings.Contains(strings.Join(b.Aliases, ","), models.DefaultFile) {
		t.Errorf("built-in model: name %q, aliases %q", b.Name, b.Aliases)
	}
	o.Name = ""
	b2, err := Load("", o)
	if err != nil {
		t.Fatal(err)
	}
	defer b2.Close()
	if b2.Name != models.DefaultName {
		t.Errorf("built-in model: name %q", b2.Name)
	}
}

// Bad input is an error that names the file, never a panic; a failed
// Start leaves the weights open for the caller.
func TestLoadErrors(t *testing.T) {
	if _, err := Load(filepath.Join(t.TempDir(), "missing.gguf"), Options{}); err == nil || !strings.Contains(err.Error(), "missing.gguf") {
		t.Errorf("missing file: %v", err)
	}
	w := gguf.NewWriter()
	w.Set("general.architecture", gguf.String("mamba"))
	p := filepath.Join(t.TempDir(), "mamba.gguf")
	if err := w.WriteFile(p); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(p); err == nil || !strings.HasPrefix(err.Error(), p+": ") {
		t.Errorf("unknown architecture: %v", err)
	}
	ws, err := Open(tinyModel(t))
	if err != nil {
		t.Fatal(err)
	}
	defer ws.Close()
	for _, o := range []Options{
		{Device: "gpu"},
		{Device: "cpu", KVType: "q4_0"},
		{Device: "cpu", ChatTemplate: "alpaca"},
		{Device: "cpu", KVMemoryMiB: 1 << 30, Allocator: ringbuf.HeapAllocator{}}, // capped at every slot at full context
	} {
		r, err := Start(ws, o)
		if o.KVMemoryMiB != 0 {
			if err != nil {
				t.Errorf("%+v: %v", o, err)
			} else {
				r.Engine.Close() // not r.Close: ws is used again
			}
			continue
		}
		if err == nil {
			t.Errorf("%+v: started", o)
		}
	}
	if ws.Model == nil || ws.Tokenizer.Len() == 0 {
		t.Error("weights unusable after a failed Start")
	}
}

// A GGUF without a chat template gets ChatML, said once in the log;
// --chat-template still wins; an unrecognised template stays an error.
func TestChatTemplateChoice(t *testing.T) {
	logs := &syncBuffer{}
	o := Options{Device: "cpu", KVBlocks: 16, Allocator: ringbuf.HeapAllocator{}, Log: zerolog.New(logs)}
	r, err := Load("", o) // the built-in model carries no template
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if r.Chat == nil || r.Chat.Format != chat.ChatML || !r.ChatFallback || r.ChatErr != nil {
		t.Fatalf("built-in model: chat %+v, fallback %v, err %v", r.Chat, r.ChatFallback, r.ChatErr)
	}
	if n := strings.Count(logs.String(), "no chat template; using ChatML"); n != 1 || !strings.Contains(logs.String(), `"level":"warn"`) {
		t.Errorf("fallback logged %d times, want once as a warning:\n%s", n, logs.String())
	}

	logs2 := &syncBuffer{}
	o.ChatTemplate, o.Log = "Mistral", zerolog.New(logs2)
	f, err := Load("", o)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if f.Chat == nil || f.Chat.Format != chat.Mistral || f.ChatFallback || strings.Contains(logs2.String(), "ChatML") {
		t.Errorf("forced mistral: %+v fallback %v\n%s", f.Chat, f.ChatFallback, logs2.String())
	}

	o.ChatTemplate = "alpaca"
	if err := o.Check(); err == nil || !strings.Contains(err.Error(), "--chat-template") || !strings.Contains(err.Error(), "chatml") {
		t.Errorf("--chat-template alpaca: %v", err)
	}
	cases := []struct {
		forced, jinja string
		want          chat.Format
		fallback      bool
		parseErr      bool
	}{
		{"", "", chat.ChatML, true, false},
		{"", " \n", chat.ChatML, true, false},
		{"", "{{'<|im_start|>' + role}}", chat.Jinja, false, false},
		{"", "{{ messages | tojson }}", chat.Jinja, false, false},
		{"", "{% if %}<|im_start|>", chat.ChatML, false, true},               // does not parse: its markers
		{"", "{% call x() %}[INST]{% endcall %}", chat.Mistral, false, true}, // a tag the engine lacks
		{"phi3", "", chat.Phi3, false, false},
		{"llama3", "{{'<|im_start|>'}}", chat.Llama3, false, false},
	}
	for _, c := range cases {
		ch := pickTemplate(templateSource{forced: c.forced, jinja: c.jinja})
		if ch.err != nil || ch.t.Format != c.want || ch.fallback != c.fallback || (ch.parseErr != nil) != c.parseErr {
			t.Errorf("pickTemplate(%q, %q) = %+v; want %s, fallback %v, parse error %v", c.forced, c.jinja, ch, c.want, c.fallback, c.parseErr)
		}
	}
	if ch := pickTemplate(templateSource{jinja: "{% for %}"}); ch.t != nil || !errors.Is(ch.err, chat.ErrUnknownTemplate) || ch.parseErr == nil {
		t.Errorf("unparsable, unrecognised template: %+v", ch)
	}
}

// A template the model came with (Options.Chat: an Ollama model's)
// replaces the GGUF's and ChatML, and a user's --chat-template or
// --chat-template-file replaces it; Options.Context caps the context.
func TestGivenTemplateAndContext(t *testing.T) {
	given := chat.Custom("given", func(chat.Request) (string, error) { return "rendered", nil })
	for _, c := range []struct {
		src  templateSource
		want chat.Format
	}{
		{templateSource{given: given}, "given"},
		{templateSource{given: given, jinja: "{{'<|im_start|>' + role}}"}, "given"},
		{templateSource{given: given, forced: "llama3"}, chat.Llama3},
		{templateSource{given: given, jinja: "{{ messages | tojson }}", file: true}, chat.Jinja},
	} {
		if ch := pickTemplate(c.src); ch.err != nil || ch.t.Format != c.want || ch.fallback {
			t.Errorf("pickTemplate(%+v) = %+v; want %s", c.src, ch, c.want)
		}
	}

	o := Options{Device: "cpu", KVBlocks: 16, Allocator: ringbuf.HeapAllocator{}, Log: zerolog.Nop(), Chat: given, Context: 100}
	r, err := Load("", o)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if r.Chat != given || r.ChatFallback || r.Model.Context != 100 || r.Engine.Config().Context != 100 {
		t.Errorf("chat %+v (fallback %v), context %d, engine's %d; want the given template and 100", r.Chat, r.ChatFallback, r.Model.Context, r.Engine.Config().Context)
	}
	o.Context = 1 << 20 // more than the model's 512: the model's
	big, err := Load("", o)
	if err != nil {
		t.Fatal(err)
	}
	defer big.Close()
	if big.Model.Context != 512 {
		t.Errorf("a num_ctx beyond the model's: context %d, want the model's 512", big.Model.Context)
	}
}

// --chat-template-file replaces the GGUF's template: rendered as Jinja with
// the vocabulary's BOS and EOS; a file that is missing or does not parse,
// or given with --chat-template, is a usage error before anything loads.
func TestChatTemplateFile(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "t.jinja")
	os.WriteFile(good, []byte("{{ bos_token }}{% for m in messages %}<{{ m.role }}>{{ m.content }}{% endfor %}{% if add_generation_prompt %}<assistant>{% endif %}{{ eos_token }}\n"), 0o644)
	bad := filepath.Join(dir, "bad.jinja")
	os.WriteFile(bad, []byte("{% for m in messages %}"), 0o644)

	o := Options{Device: "cpu", KVBlocks: 16, Allocator: ringbuf.HeapAllocator{}, Log: zerolog.Nop(), ChatTemplateFile: good}
	r, err := Load("", o)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	v := r.Tokenizer.Vocab()
	if r.Chat == nil || r.Chat.Format != chat.Jinja || r.ChatFallback {
		t.Fatalf("chat %+v fallback %v", r.Chat, r.ChatFallback)
	}
	got, err := r.Chat.Render([]chat.Message{{Role: "user", Content: "hi"}}, true)
	if want := tokenText(v, v.BOS) + "<user>hi<assistant>" + tokenText(v, v.EOS); err != nil || got != want {
		t.Errorf("rendered %q, %v; want %q", got, err, want)
	}
	for _, c := range []struct {
		o    Options
		want string
	}{
		{Options{ChatTemplateFile: bad}, "does not parse"},
		{Options{ChatTemplateFile: filepath.Join(dir, "missing.jinja")}, "no such file"},
		{Options{ChatTemplateFile: good, ChatTemplate: "chatml"}, "give one of them"},
	} {
		if err := c.o.Check(); err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), "--chat-template") {
			t.Errorf("%+v: %v, want %q", c.o, err, c.want)
		}
	}
}

// The step sizes: the device's defaults when 0 (2048 tokens a step on
// CUDA, whole-budget prefill chunks; the engine's on the CPU), given
// values as they are, a chunk never above the budget.
func TestStepSizes(t *testing.T) {
	for _, c := range []struct {
		device        string
		budget, chunk int
		wantB, wantC  int
	}{
		{"cuda", 0, 0, 2048, 2048},
		{"cuda", 4096, 0, 4096, 4096},
		{"cuda", 0, 512, 2048, 512},
		{"cuda", 256, 1024, 256, 256},
		{"cpu", 0, 0, engine.DefaultTokenBudget, engine.DefaultPrefillChunk},
		{"cpu", 100, 0, 100, 100},
		{"cpu", 1000, 64, 1000, 64},
	} {
		b, ch := stepSizes(c.device, Options{TokenBudget: c.budget, PrefillChunk: c.chunk})
		if b != c.wantB || ch != c.wantC {
			t.Errorf("%s, budget %d, chunk %d: %d, %d; want %d, %d", c.device, c.budget, c.chunk, b, ch, c.wantB, c.wantC)
		}
	}
	for _, o := range []Options{{TokenBudget: -1}, {PrefillChunk: -8}} {
		if err := o.Check(); err == nil || !strings.Contains(err.Error(), "--token-budget") {
			t.Errorf("%+v: %v", o, err)
		}
	}
	// Through Load to the engine and the device's step limit.
	for _, c := range []struct{ budget, chunk, wantB, wantC int }{
		{0, 0, engine.DefaultTokenBudget, engine.DefaultPrefillChunk},
		{700, 0, 700, engine.DefaultPrefillChunk},
		{700, 300, 700, 300},
	} {
		r, err := Load(tinyModel(t), Options{Device: "cpu", Slots: 2, KVBlocks: 64, TokenBudget: c.budget, PrefillChunk: c.chunk,
			Allocator: ringbuf.HeapAllocator{}, Log: zerolog.Nop()})
		if err != nil {
			t.Fatal(err)
		}
		ec := r.Engine.Config()
		if ec.TokenBudget != c.wantB || ec.PrefillChunk != c.wantC {
			t.Errorf("budget %d, chunk %d: the engine has %d, %d; want %d, %d", c.budget, c.chunk, ec.TokenBudget, ec.PrefillChunk, c.wantB, c.wantC)
		}
		r.Close()
	}
}

// TestDefaultSlots: Options.Slots 0 takes the device's default (64 on the
// CPU, 256 on CUDA); a number given is taken as it is.
func TestDefaultSlots(t *testing.T) {
	if DefaultSlots("cpu") != 64 || DefaultSlots("cuda") != 256 {
		t.Fatalf("DefaultSlots: cpu %d, cuda %d; want 64, 256", DefaultSlots("cpu"), DefaultSlots("cuda"))
	}
	for _, c := range []struct{ slots, want int }{{0, 64}, {3, 3}} {
		r, err := Load(tinyModel(t), Options{Device: "cpu", Slots: c.slots, KVBlocks: 64, Allocator: ringbuf.HeapAllocator{}, Log: zerolog.Nop()})
		if err != nil {
			t.Fatal(err)
		}
		if got := r.Engine.Config().Slots; got != c.want {
			t.Errorf("Slots %d: the engine has %d slots, want %d", c.slots, got, c.want)
		}
		r.Close()
	}
}

// On the CPU a model file's weights are read into memory of their own
// (gguf.OpenResident), equal to the file's; Mmap keeps the mapping; Close
// releases both.
func TestCPUWeightsResident(t *testing.T) {
	for _, mmap := range []bool{false, true} {
		ws, err := Open(tinyModel(t))
		if err != nil {
			t.Fatal(err)
		}
		first := ws.File
		r, err := Start(ws, Options{Device: "cpu", KVBlocks: 16, Allocator: ringbuf.HeapAllocator{}, Mmap: mmap})
		if err != nil {
			t.Fatal(err)
		}
		if mmap != (ws.mapped == nil) || mmap != (ws.File == first) {
			t.Fatalf("mmap %v: resident copy %v", mmap, ws.mapped != nil)
		}
		if !mmap {
			for i := range ws.File.Tensors {
				ti := &ws.File.Tensors[i]
				mt, ok := first.Tensor(ti.Name)
				if !ok || !bytes.Equal(ws.File.Data(ti), first.Data(mt)) {
					t.Fatalf("tensor %s differs from the file's", ti.Name)
				}
			}
		}
		if err := r.Close(); err != nil {
			t.Fatal(err)
		}
	}
}
