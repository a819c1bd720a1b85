package engine

import (
	"context"
	"fmt"
	"testing"
	"time"

	"ringlm/kernels/null"
	"ringlm/ringbuf"
	"ringlm/sample"
)

func newNullEngine(t testing.TB, cfg Config) *Engine {
	t.Helper()
	if cfg.Vocab == 0 {
		cfg.Vocab = 1000
	}
	if cfg.Context == 0 {
		cfg.Context = 4096
	}
	if cfg.NumBlocks == 0 {
		cfg.NumBlocks = 1024
	}
	if cfg.Allocator == nil {
		cfg.Allocator = ringbuf.HeapAllocator{} // the race detector sees Go memory only
	}
	if cfg.BlockSize == 0 {
		cfg.BlockSize = 16
	}
	if cfg.Slots == 0 {
		cfg.Slots = 16
	}
	dev := null.New(cfg.Vocab, cfg.NumBlocks, cfg.BlockSize, cfg.Slots)
	e, err := New(cfg, dev)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close() })
	return e
}

func collect(t testing.TB, s *Stream) []Token {
	t.Helper()
	out, err := collectErr(s)
	if err != nil {
		t.Error(err)
	}
	return out
}

// collectErr reads a stream to its end. The deadline is generous: the
// race detector on a loaded 2-core machine is slow.
func collectErr(s *Stream) ([]Token, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	var out []Token
	for {
		var done bool
		var err error
		out, done, err = s.Recv(ctx, out)
		if err != nil {
			return out, fmt.Errorf("recv %s: %w", s.ID, err)
		}
		if done {
			return out, nil
		}
	}
}

func TestNullEngineGenerates(t *testing.T) {
	e := newNullEngine(t, Config{})
	p := sample.Defaults()
	p.Seed, p.MaxTokens = 42, 20
	prompt := make([]int32, 37)
	for i := range prompt {
		prompt[i] = int32(i)
	}
	s, err := e.Submit(context.Background(), Request{Prompt: prompt, Params: p})
	if err != nil {
		t.Fatal(err)
	}
	toks := collect(t, s)
	if len(toks) != 20 {
		t.Fatalf("%d tokens", len(toks))
	}
	for i, tk := range toks {
		want := null.Token(42, 37+i, 1000)
		if tk.ID != want || tk.Pos != 37+i {
			t.Fatalf("token %d: %d at %d, want %d at %d", i, tk.ID, tk.Pos, want, 37+i)
		}
	}
	if f, err := s.Finish(); f != FinishLength || err != nil {
		t.Fatalf("finish %v %v", f, err)
	}
}
