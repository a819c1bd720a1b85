package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"sync"

	"ringlm/chat"
	"ringlm/engine"
	"ringlm/runner"
	"ringlm/sample"
	"ringlm/tokenizer"
)

// repl is `ringlm run`'s interactive chat (no -p, a terminal on stdin),
// as `ollama run` has it: every message goes to the model with the whole
// conversation, rendered through the chat template; the answer streams as
// it is sampled; /clear forgets the conversation; /bye or Ctrl-D (EOF)
// leaves; Ctrl-C stops the answer being generated, not the session.
// Lines are read in the terminal's own line mode: no raw mode to restore
// if the process dies, and the terminal's line editing works.
type repl struct {
	lm        *runner.Runner
	params    sample.Params // MaxTokens 0: each answer up to the context's end
	ignoreEOS bool
	system    string
	in        *bufio.Reader
	out       io.Writer // the conversation
	stats     io.Writer // timings after each answer, when verbose
	verbose   bool

	history []chat.Message // user and assistant turns, always in pairs; the system message apart
	last    answer         // the latest answer

	// mu orders the writes to out between the session and interrupt
	// (the signal's goroutine), and guards cancel and reset.
	mu     sync.Mutex
	cancel context.CancelFunc // ends the answer being generated; nil at the prompt
	reset  bool               // ^C at the prompt: drop the message being typed
}

const replHelp = `Available commands:
  /clear          forget the conversation
  /bye            exit (also /exit, or Ctrl-D)
  /?, /help       this help

Use """ to begin a multi-line message, and """ to end it.
Ctrl-C stops an answer; the conversation keeps what it printed.
`

// runWithSignals runs the session with ^C routed to interrupt.
func (r *repl) runWithSignals() error {
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, os.Interrupt)
	defer signal.Stop(sigs)
	done := make(chan struct{})
	defer close(done)
	go func() {
		for {
			select {
			case <-sigs:
				r.interrupt()
			case <-done:
				return
			}
		}
	}()
	return r.run()
}

// run reads messages and commands until /bye or EOF.
func (r *repl) run() error {
	r.say("Chatting with %s (%s template). /? for help, /bye or Ctrl-D to exit, Ctrl-C stops an answer.\n", r.lm.Name, r.lm.Chat.Format)
	for {
		msg, eof, err := r.readMessage()
		if err != nil {
			return err
		}
		switch {
		case msg == "":
		case msg == "/bye" || msg == "/exit":
			return nil
		case msg == "/clear":
			r.history = nil
			r.say("Cleared the conversation.\n")
		case msg == "/?" || msg == "/help":
			r.say("%s", replHelp)
		case strings.HasPrefix(msg, "/") && !strings.ContainsAny(msg, " \n"):
			r.say("Unknown command %q. Type /? for help.\n", msg)
		default:
			if err := r.chat(msg); err != nil {
				return err
			}
		}
		if eof {
			r.say("\n") // the shell's prompt on a line of its own after Ctrl-D
			return nil
		}
	}
}

// interrupt is ^C: it stops the answer being generated, or at the prompt
// drops the message being typed and says how to leave.
func (r *repl) interrupt() {
	r.mu.Lock()
	cancel := r.cancel
	if cancel == nil {
		r.reset = true
		fmt.Fprint(r.out, "\nUse Ctrl-D or /bye to exit.\n>>> ")
	}
	r.mu.Unlock()
	if cancel != nil {
		cancel()
	}
}

// say writes to the conversation when no answer is being generated.
func (r *repl) say(format string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	fmt.Fprintf(r.out, format, args...)
}

// readMessage reads one message: a line, or the lines between """ and
// """. eof reports that the input ended after it.
func (r *repl) readMessage() (msg string, eof bool, err error) {
	r.say(">>> ")
	var lines []string
	multi := false
	for {
		line, err := r.in.ReadString('\n')
		eof = errors.Is(err, io.EOF)
		if err != nil && !eof {
			return "", false, err
		}
		line = strings.TrimRight(line, "\r\n")
		r.mu.Lock()
		if r.reset {
			lines, multi, r.reset = nil, false, false
		}
		r.mu.Unlock()
		if !multi {
			rest, ok := strings.CutPrefix(line, `"""`)
			if !ok {
				return strings.TrimSpace(line), eof, nil
			}
			if body, ok := strings.CutSuffix(rest, `"""`); ok {
				return strings.TrimSpace(body), eof, nil
			}
			multi, line = true, rest
		} else if body, ok := strings.CutSuffix(line, `"""`); ok {
			return strings.TrimSpace(strings.Join(append(lines, body), "\n")), eof, nil
		}
		lines = append(lines, line)
		if eof {
			return strings.TrimSpace(strings.Join(lines, "\n")), eof, nil
		}
		r.say("... ")
	}
}

// chat answers msg with the conversation so far and keeps both. A
// message that cannot fit is reported and left out; the session goes on.
func (r *repl) chat(msg string) error {
	limit, why := contextLimit(r.lm)
	ids, dropped, err := r.promptFor(msg, limit, why)
	if err != nil {
		r.say("%v\n", err)
		return nil
	}
	if dropped > 0 {
		r.say("(the oldest %d messages were left out to fit %s)\n", dropped, why)
	}
	sp := r.params
	room := limit - len(ids)
	toEnd := sp.MaxTokens == 0 || sp.MaxTokens > room
	if toEnd {
		sp.MaxTokens = room
	}

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	r.mu.Lock()
	r.cancel = cancel
	r.mu.Unlock()
	a, err := generate(ctx, r.lm, engine.Request{Prompt: ids, Params: sp, IgnoreEOS: r.ignoreEOS}, bufio.NewWriter(r.out), true)
	r.mu.Lock()
	r.cancel = nil
	r.mu.Unlock()
	if err != nil {
		return err
	}
	r.last = a
	end := "\n"
	if !strings.HasSuffix(a.text, "\n") {
		end = "\n\n"
	}
	r.say("%s", end)
	// An answer stopped before it printed anything is forgotten with its
	// question, so that the user can ask again; a partial one is kept as
	// the user saw it.
	if a.reason != finishInterrupted || a.text != "" {
		r.history = append(r.history, chat.Message{Role: "user", Content: msg}, chat.Message{Role: "assistant", Content: a.text})
	}
	if toEnd && a.reason == engine.FinishLength {
		r.say("(the answer stopped at %s; /clear starts a new conversation)\n", why)
	}
	if r.verbose {
		a.printStats(r.stats, 0)
		fmt.Fprintf(r.stats, "finish reason = %s\n", a.reason)
	}
	return nil
}

// promptFor renders the conversation with msg and tokenizes it. When that
// leaves too little room for an answer (a quarter of the context, or -n
// when smaller), the oldest exchanges are left out, as Ollama does;
// dropped counts the messages. A message that fills the context alone is
// an error, and the history is then kept.
func (r *repl) promptFor(msg string, limit int, why string) (ids []int32, dropped int, err error) {
	reserve := limit / 4
	if r.params.MaxTokens > 0 {
		reserve = min(reserve, r.params.MaxTokens)
	}
	h := r.history
	for {
		msgs := make([]chat.Message, 0, len(h)+2)
		if r.system != "" {
			msgs = append(msgs, chat.Message{Role: "system", Content: r.system})
		}
		msgs = append(append(msgs, h...), chat.Message{Role: "user", Content: msg})
		text, err := r.lm.Chat.Render(msgs, true)
		if err != nil {
			return nil, 0, err
		}
		text = r.lm.Chat.StripBOS(text, r.lm.Tokenizer.Vocab().AddBOS)
		ids = r.lm.Tokenizer.EncodeWith(text, tokenizer.EncodeOptions{ParseSpecial: true, AddSpecial: true})
		if len(ids)+reserve <= limit || len(h) < 2 {
			if len(ids) >= limit {
				return nil, 0, fmt.Errorf("the message is too long: %d tokens with the template fill %s", len(ids), why)
			}
			r.history = h
			return ids, dropped, nil
		}
		h, dropped = h[2:], dropped+2
	}
}
