package main

import (
	"bufio"
	"fmt"
	"io"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"ringlm/chat"
	"ringlm/engine"
	"ringlm/gguf"
	"ringlm/internal/testmodel"
	"ringlm/runner"
	"ringlm/sample"
)

// replOutput is the session's terminal: it collects what the session
// writes, signals each prompt (">>> ") and can call a function on the
// next write, synchronously, as a ^C typed while that text appears.
type replOutput struct {
	mu      sync.Mutex
	b       strings.Builder
	prompts chan struct{}
	next    func()
}

func newReplOutput() *replOutput { return &replOutput{prompts: make(chan struct{}, 16)} }

func (o *replOutput) Write(p []byte) (int, error) {
	o.mu.Lock()
	o.b.Write(p)
	fn := o.next
	o.next = nil
	o.mu.Unlock()
	if fn != nil {
		fn()
	}
	if strings.HasSuffix(string(p), ">>> ") {
		select {
		case o.prompts <- struct{}{}:
		default: // nobody waits for prompts
		}
	}
	return len(p), nil
}

func (o *replOutput) String() string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.b.String()
}

func (o *replOutput) onNextWrite(fn func()) {
	o.mu.Lock()
	o.next = fn
	o.mu.Unlock()
}

// waitPrompt waits for the session's next prompt; the timeout only
// catches a hung session.
func (o *replOutput) waitPrompt(t *testing.T, done <-chan error) {
	t.Helper()
	select {
	case <-o.prompts:
	case err := <-done:
		t.Fatalf("the session ended: %v\n%s", err, o.String())
	case <-time.After(2 * time.Minute):
		t.Fatalf("no prompt:\n%s", o.String())
	}
}

func loadForREPL(t *testing.T, path string) *runner.Runner {
	t.Helper()
	lm, err := runner.Load(path, runner.Options{Device: envOr("RINGLM_DEVICE", "cpu"), Slots: 1, KVMemoryMiB: 64, MaxQueue: 1, Log: zerolog.Nop()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { lm.Close() })
	return lm
}

func greedy(maxTokens int) sample.Params {
	sp := sample.Defaults()
	sp.Temperature, sp.MaxTokens = 0, maxTokens
	return sp
}

// The interactive chat: streamed answers, the conversation kept and sent
// again with each message, ^C at the prompt and during an answer, /clear,
// unknown commands, multi-line messages, /bye.
func TestChatREPL(t *testing.T) {
	lm := loadForREPL(t, testmodel.Path(t, "llama", gguf.TypeF16))
	in, feed := io.Pipe()
	defer feed.Close()
	out := newReplOutput()
	r := &repl{lm: lm, params: greedy(24), ignoreEOS: true, system: "Be brief.", in: bufio.NewReader(in), out: out, stats: io.Discard}
	done := make(chan error, 1)
	go func() { done <- r.run() }()
	send := func(line string) {
		t.Helper()
		if _, err := io.WriteString(feed, line); err != nil {
			t.Fatal(err)
		}
		out.waitPrompt(t, done)
	}

	out.waitPrompt(t, done)
	if !strings.Contains(out.String(), "Chatting with "+lm.Name+" (jinja template)") {
		t.Errorf("banner: %q", out.String())
	}
	r.interrupt() // ^C at the prompt: a hint, and the session goes on
	out.waitPrompt(t, done)
	if !strings.Contains(out.String(), "Use Ctrl-D or /bye to exit.") {
		t.Errorf("no hint after ^C at the prompt: %q", out.String())
	}

	send("hello\n")
	first := r.last
	if first.reason != engine.FinishLength || first.generated != 24 || first.text == "" {
		t.Fatalf("first answer: %+v", first)
	}
	if !strings.Contains(out.String(), first.text+"\n\n>>> ") {
		t.Errorf("the answer %q was not streamed:\n%s", first.text, out.String())
	}
	want := []chat.Message{{Role: "user", Content: "hello"}, {Role: "assistant", Content: first.text}}
	if !equalMessages(r.history, want) {
		t.Fatalf("history %+v", r.history)
	}

	send("and again\n")
	// The second prompt carries the first exchange: its tokens and more.
	if r.last.prompt <= first.prompt+10 || len(r.history) != 4 || r.history[2].Content != "and again" {
		t.Fatalf("second turn: prompt %d tokens (first %d), history %+v", r.last.prompt, first.prompt, r.history)
	}

	// ^C while the answer streams: the answer stops, the session goes on
	// and keeps what was printed.
	out.onNextWrite(r.interrupt)
	send("tell me more\n")
	if r.last.reason != finishInterrupted || r.last.generated >= 24 {
		t.Fatalf("interrupted answer: %+v", r.last)
	}
	if n := len(r.history); (r.last.text != "" && n != 6) || (r.last.text == "" && n != 4) {
		t.Errorf("history after ^C: %d messages, answer %q", n, r.last.text)
	}
	if !strings.HasSuffix(out.String(), "\n\n>>> ") {
		t.Errorf("no newline after the interrupted answer: %q", out.String()[max(0, len(out.String())-40):])
	}

	send("/clear\n")
	if len(r.history) != 0 || !strings.Contains(out.String(), "Cleared the conversation.") {
		t.Errorf("/clear: history %+v", r.history)
	}
	send("/nope\n")
	if !strings.Contains(out.String(), `Unknown command "/nope". Type /? for help.`) {
		t.Errorf("unknown command: %q", out.String())
	}
	send("/?\n")
	if !strings.Contains(out.String(), "/clear") || !strings.Contains(out.String(), `"""`) {
		t.Errorf("help: %q", out.String())
	}
	io.WriteString(feed, "\"\"\"\nline one\n")
	io.WriteString(feed, "line two\n")
	send("\"\"\"\n")
	if len(r.history) != 2 || r.history[0].Content != "line one\nline two" {
		t.Errorf("multi-line message: %+v", r.history)
	}
	if !strings.Contains(out.String(), ">>> ... ... ") {
		t.Errorf("no continuation prompts: %q", out.String())
	}

	io.WriteString(feed, "/bye\n")
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(time.Minute):
		t.Fatal("/bye did not end the session")
	}
}

// Ctrl-D (the end of the input) ends the session after the message typed
// before it, on a fresh line.
func TestChatREPLEOF(t *testing.T) {
	lm := loadForREPL(t, testmodel.Path(t, "llama", gguf.TypeF16))
	out := newReplOutput()
	r := &repl{lm: lm, params: greedy(4), in: bufio.NewReader(strings.NewReader("hi\nlast words")), out: out, stats: io.Discard}
	if err := r.run(); err != nil {
		t.Fatal(err)
	}
	if len(r.history) != 4 || r.history[2].Content != "last words" || !strings.HasSuffix(out.String(), "\n") {
		t.Errorf("history %+v, output %q", r.history, out.String())
	}
}

// A conversation that outgrows the context loses its oldest exchanges; a
// message that cannot fit alone is refused and the conversation kept.
func TestChatREPLContext(t *testing.T) {
	lm := loadForREPL(t, "") // the built-in model: 512 tokens of context
	long := strings.Repeat("fmt.Println(x); ", 60)
	out := newReplOutput()
	input := long + "\n" + long + "\n" + strings.Repeat(long, 3) + "\n"
	r := &repl{lm: lm, params: greedy(8), in: bufio.NewReader(strings.NewReader(input)), out: out, stats: io.Discard}
	if err := r.run(); err != nil {
		t.Fatal(err)
	}
	o := out.String()
	if r.last.prompt < 256 || r.last.prompt > 512-8 {
		t.Errorf("the message is %d tokens with the template; the test wants one between 256 and 504", r.last.prompt)
	}
	if !strings.Contains(o, "(the oldest 2 messages were left out to fit the model's context length of 512 tokens)") {
		t.Errorf("no note of the dropped exchange:\n%s", o)
	}
	if !strings.Contains(o, "the message is too long: ") || len(r.history) != 2 || r.history[0].Content != strings.TrimSpace(long) {
		t.Errorf("too long a message: history of %d\n%s", len(r.history), o)
	}
}

func equalMessages(a, b []chat.Message) bool {
	return fmt.Sprint(a) == fmt.Sprint(b)
}
