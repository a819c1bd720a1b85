//go:build unix

package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"ringlm/gguf"
	"ringlm/synth"
)

// The tests here send real signals: to a child process running this test
// binary as ringlm (TestMain, RINGLM_TEST_MAIN), or to this process while
// the command under test has taken them.

var (
	longOnce sync.Once
	longPath string
	longErr  error
)

// longModel is the tiny llama with synth's vocabulary and a context of
// 32768 tokens: generating to its end takes long enough on a CPU that a
// signal sent once the first tokens are out always finds the generation
// running.
func longModel(t *testing.T) string {
	t.Helper()
	longOnce.Do(func() {
		shape, err := synth.Lookup("tiny", "llama")
		if err != nil {
			longErr = err
			return
		}
		shape.Context = 32768
		w, err := synth.Build(synth.Options{Shape: shape, Type: gguf.TypeF16, Seed: 5})
		if err != nil {
			longErr = err
			return
		}
		dir, err := os.MkdirTemp("", "ringlm-cmd-long")
		if err != nil {
			longErr = err
			return
		}
		longPath = filepath.Join(dir, "long.gguf")
		longErr = w.WriteFile(longPath)
	})
	if longErr != nil {
		t.Fatal(longErr)
	}
	return longPath
}

// ^C in run stops the generation, ends the output with a newline and
// prints the stats; the exit status is 130. The binary runs as a child
// process and gets a real SIGINT once it has printed its first tokens.
func TestRunInterrupt(t *testing.T) {
	m := longModel(t)
	cmd := exec.Command(os.Args[0], "run", "-m", m, "-p", "The ring", "-n", "30000", "--ignore-eos", "--seed", "1")
	cmd.Env = append(os.Environ(), "RINGLM_TEST_MAIN=1")
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr lockedBuffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	first := make([]byte, 1)
	if _, err := io.ReadFull(stdout, first); err != nil {
		cmd.Process.Kill()
		cmd.Wait()
		t.Fatalf("no output: %v\n%s", err, stderr.String())
	}
	if err := cmd.Process.Signal(os.Interrupt); err != nil {
		t.Fatal(err)
	}
	rest, _ := io.ReadAll(stdout)
	err = cmd.Wait()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 130 {
		t.Fatalf("exit: %v (want status 130)\n%s", err, stderr.String())
	}
	out := string(first) + string(rest)
	if !strings.HasSuffix(out, "\n") {
		t.Errorf("the output does not end with a newline: ...%q", out[max(0, len(out)-40):])
	}
	e := stderr.String()
	for _, want := range []string{"prompt eval", "finish reason = interrupted", "ringlm run: interrupted"} {
		if !strings.Contains(e, want) {
			t.Errorf("stderr lacks %q:\n%s", want, e)
		}
	}
	t.Logf("interrupted after %d bytes of output", len(out))
}

// `ringlm run` with no -p and a terminal on stdin opens the chat, with a
// real SIGINT routed to it: at the prompt it prints the hint, and the
// process lives on. Without a terminal, stdin is the prompt.
func TestRunInteractive(t *testing.T) {
	in, feed := io.Pipe()
	defer feed.Close()
	out := newReplOutput()
	var stderr lockedBuffer
	done := make(chan error, 1)
	go func() { done <- runWith(in, true, []string{"-n", "4", "--temp", "0"}, out, &stderr) }()
	out.waitPrompt(t, done) // the handler is in place before the banner
	if err := syscall.Kill(os.Getpid(), syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	out.waitPrompt(t, done)
	io.WriteString(feed, "func main() {\n")
	out.waitPrompt(t, done)
	io.WriteString(feed, "/bye\n")
	if err := <-done; err != nil {
		t.Fatalf("%v\n%s", err, stderr.String())
	}
	o := out.String()
	for _, want := range []string{"Chatting with gocoder (chatml template)", "Use Ctrl-D or /bye to exit."} {
		if !strings.Contains(o, want) {
			t.Errorf("output lacks %q:\n%s", want, o)
		}
	}
	if strings.Count(o, ">>> ") != 3 || !strings.Contains(stderr.String(), "using ChatML") {
		t.Errorf("output:\n%s\nstderr:\n%s", o, stderr.String())
	}

	var plain, e strings.Builder
	if err := runWith(strings.NewReader("func main() {\n"), false, []string{"-n", "4", "--temp", "0", "--verbose=false"}, &plain, &e); err != nil || strings.Contains(plain.String(), ">>>") || plain.String() == "" {
		t.Errorf("stdin not a terminal: %v %q %q", err, plain.String(), e.String())
	}
}

// A second signal while serve drains exits at once, with 130 for ^C,
// instead of waiting for the running request (which would take minutes
// here, with a 10-minute drain allowed).
func TestServeSecondSignal(t *testing.T) {
	m := longModel(t)
	cmd := exec.Command(os.Args[0], "serve", "-m", m, "--port", "0", "--log-format", "json", "--slots", "1",
		"--max-tokens", "30000", "--shutdown-timeout", "10m")
	cmd.Env = append(os.Environ(), "RINGLM_TEST_MAIN=1")
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	var logs lockedBuffer
	lines := make(chan map[string]any, 64)
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			logs.Write(append(sc.Bytes(), '\n'))
			var rec map[string]any
			if json.Unmarshal(sc.Bytes(), &rec) == nil {
				select {
				case lines <- rec:
				default:
				}
			}
		}
		exited <- cmd.Wait()
	}()
	defer cmd.Process.Kill() // after a failure; os.ErrProcessDone otherwise
	// waitLog returns the first log record with the message.
	waitLog := func(prefix string) map[string]any {
		t.Helper()
		timeout := time.After(2 * time.Minute)
		for {
			select {
			case rec := <-lines:
				if msg, _ := rec["message"].(string); strings.HasPrefix(msg, prefix) {
					return rec
				}
			case <-timeout:
				t.Fatalf("no %q in the log:\n%s", prefix, logs.String())
			}
		}
	}
	addr, _ := waitLog("listening")["addr"].(string)
	waitLog("ready")

	resp, err := http.Post("http://"+addr+"/execute", "application/json",
		strings.NewReader(`{"prompt":"The ring","max_tokens":30000,"ignore_eos":true}`))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	br := bufio.NewReader(resp.Body)
	if line, _ := br.ReadString('\n'); line != "event: started\n" {
		t.Fatalf("first line %q", line)
	}
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if rec := waitLog("shutting down"); rec["running"] != float64(1) {
		t.Errorf("draining %v requests, want 1", rec["running"])
	}
	if err := cmd.Process.Signal(os.Interrupt); err != nil {
		t.Fatal(err)
	}
	select {
	case err = <-exited:
	case <-time.After(2 * time.Minute):
		t.Fatalf("still draining after a second signal:\n%s", logs.String())
	}
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 130 {
		t.Fatalf("exit: %v (want status 130)\n%s", err, logs.String())
	}
	if rec := waitLog("second signal: exiting now"); rec["signal"] != "interrupt" || rec["level"] != "warn" {
		t.Errorf("second signal logged as %v", rec)
	}
	if rest, _ := io.ReadAll(br); strings.Contains(string(rest), "event: end") {
		t.Errorf("the request ran to its end:\n%s", rest)
	}
}
