package bench

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"runtime"
	"strings"
)

// ServeRequest is one prompt that `bench serve` sends.
type ServeRequest struct {
	Prompt    string
	MaxTokens int
	// InputLen is the prompt's length in tokens as estimated here; the
	// server's usage.prompt_tokens replaces it when reported.
	InputLen int
}

// promptWords are common English words that random prompts are made of:
// legible, plain ASCII (a cut between tokens never splits a character),
// one or a few tokens each in the usual BPE vocabularies.
var promptWords = uniqueWords(`the of and to in is was for on that with as by at from
his her it an were are which this be or has had not but first one their its new
after who they have two been other all also more time into year only over city
some world would where later up such used many can state about national out known
university united then made years may during most high school since any these part
south north east west game people between under when early three well both through
there government life work team name number found second being each against same
world called small great water long best local four around while film before city
music still day film group public because played million different member war five
line another county area season place early family series several own general house
including late major until book history centerTitle best main back built began down old
team left form left again large them among show three power city during end set
end based title system law land although group field final similar never film home
right company next age top won small state west point making six human best
country days given original become support held along due whole body art period
white level light black red green blue road river sea island air sound energy`)

func uniqueWords(s string) []string {
	seen := map[string]bool{}
	var out []string
	for _, w := range strings.Fields(s) {
		if !seen[w] {
			seen[w] = true
			out = append(out, w)
		}
	}
	return out
}

// RandomPrompts makes n prompts of random common words, each asking for
// outputLen tokens, and the same n prompts again for the same seed and
// tokenizer. Each prompt comes from its own generator (seed, index), so
// they are built in parallel and do not depend on one another.
//
// With a tokenizer, a prompt is exactly inputLen tokens as the server
// counts a completion prompt (its special tokens included, as vLLM's
// random dataset counts them): words are added until their text holds
// more than inputLen tokens, then the text is cut at a token boundary
// and re-encoded. A cut whose text re-encodes to another count (tokens
// merging across it) is tried again a few tokens either side; a prompt
// no cut makes exact keeps the closest count, in its InputLen. Without
// a tokenizer (tk nil) the prompts are about inputLen tokens, estimated
// at four bytes a token.
func RandomPrompts(ctx context.Context, tk PromptTokenizer, n, inputLen, outputLen int, seed int64) ([]ServeRequest, error) {
	out := make([]ServeRequest, n)
	if tk == nil {
		for i := range out {
			text := randomWords(promptRand(seed, i), 4*inputLen-3) // estimatePromptTokens(text) >= inputLen
			out[i] = ServeRequest{Prompt: text, MaxTokens: outputLen, InputLen: estimatePromptTokens(text)}
		}
		return out, nil
	}
	// Words per token, measured once on a sample so that every prompt
	// is built from the same estimate (the result does not depend on it,
	// only the number of calls to the tokenizer).
	sample := 64
	ids, err := tk.Encode(ctx, wordsText(promptRand(seed, -1), sample))
	if err != nil {
		return nil, err
	}
	perWord := float64(max(1, len(ids))) / float64(sample)
	target := max(1, inputLen-tk.Special())

	workers := max(1, min(n, 2*runtime.GOMAXPROCS(0), 8))
	next := make(chan int)
	errs := make(chan error, workers)
	bctx, cancel := context.WithCancel(ctx)
	defer cancel()
	for range workers {
		go func() {
			var first error
			for i := range next {
				if first != nil {
					continue
				}
				text, count, err := exactPrompt(bctx, tk, promptRand(seed, i), target, perWord)
				if err != nil {
					first = err
					cancel()
					continue
				}
				out[i] = ServeRequest{Prompt: text, MaxTokens: outputLen, InputLen: count + tk.Special()}
			}
			errs <- first
		}()
	}
feed:
	for i := range out {
		select {
		case next <- i:
		case <-bctx.Done():
			break feed
		}
	}
	close(next)
	for range workers {
		if e := <-errs; e != nil && err == nil {
			err = e
		}
	}
	if err == nil {
		err = ctx.Err()
	}
	if err != nil {
		return nil, err
	}
	return out, nil
}

// promptRand is prompt i's generator; i = -1 is the sample's.
func promptRand(seed int64, i int) *rand.Rand {
	return rand.New(rand.NewPCG(uint64(seed), randPrompts^uint64(i+1)<<32))
}

func nextWord(rng *rand.Rand) string { return promptWords[rng.IntN(len(promptWords))] }

// randomWords is random words up to at least minBytes.
func randomWords(rng *rand.Rand, minBytes int) string {
	var b strings.Builder
	for b.Len() == 0 || b.Len() < minBytes {
		if b.Len() > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(nextWord(rng))
	}
	return b.String()
}

func wordsText(rng *rand.Rand, k int) string {
	words := make([]string, k)
	for i := range words {
		words[i] = nextWord(rng)
	}
	return strings.Join(words, " ")
}

// cutSlack is how many tokens past the target a prompt's words reach,
// and how far either side of the target cuts are tried.
const cutSlack = 8

// exactPrompt is one prompt of target tokens (Encode's count) from rng's
// words, or the closest it found, with its count.
func exactPrompt(ctx context.Context, tk PromptTokenizer, rng *rand.Rand, target int, perWord float64) (string, int, error) {
	var words []string
	grow := func(tokens int) {
		for range int(float64(tokens)/perWord) + 1 {
			words = append(words, nextWord(rng))
		}
	}
	grow(target + cutSlack)
	var ids []int32
	for {
		var err error
		if ids, err = tk.Encode(ctx, strings.Join(words, " ")); err != nil {
			return "", 0, err
		}
		if len(ids) >= target+cutSlack {
			break
		}
		grow(target + cutSlack - len(ids))
	}
	// Cuts at target, target−1, target+1, target−2, …: the first whose
	// text re-encodes to target tokens wins, else the closest (the
	// shorter on a tie, so that it fits where target fits).
	bestText, bestCount := "", 0
	for d := 0; d <= 2*cutSlack; d++ {
		c := target + (d+1)/2
		if d%2 == 1 {
			c = target - (d+1)/2
		}
		if c < 1 || c > len(ids) {
			continue
		}
		text, err := tk.Decode(ctx, ids[:c])
		if err != nil {
			return "", 0, err
		}
		// A detokenizer may give back a SentencePiece space prefix the
		// words never had; the encoder adds its own.
		text = strings.TrimLeft(text, " ")
		if text == "" {
			continue
		}
		re, err := tk.Encode(ctx, text)
		if err != nil {
			return "", 0, err
		}
		if len(re) == target {
			return text, target, nil
		}
		if off, best := abs(len(re)-target), abs(bestCount-target); bestText == "" || off < best || off == best && len(re) < bestCount {
			bestText, bestCount = text, len(re)
		}
	}
	if bestText == "" {
		return "", 0, fmt.Errorf("no prompt text of %d tokens: the tokenizer decodes every cut to empty text", target)
	}
	return bestText, bestCount, nil
}

func abs(x int) int {
	if x < 0 {
		return -x
	}
	return x
}

// serveLine is one line of a dataset file.
type serveLine struct {
	Prompt    *string `json:"prompt"`
	OutputLen *int    `json:"output_len"`
	MaxTokens *int    `json:"max_tokens"`
}

// ReadServeDataset reads JSONL: one object per line with "prompt" (a string)
// and optionally "output_len" or "max_tokens" (a positive integer; else
// defaultOutput). Blank lines are skipped; a malformed line is an error
// naming it.
func ReadServeDataset(name string, defaultOutput int) ([]ServeRequest, error) {
	f, err := os.Open(name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return parseServeDataset(f, name, defaultOutput)
}

func parseServeDataset(r io.Reader, name string, defaultOutput int) ([]ServeRequest, error) {
	br := bufio.NewReader(r)
	var out []ServeRequest
	for line := 1; ; line++ {
		text, err := br.ReadBytes('\n')
		if err != nil && !errors.Is(err, io.EOF) {
			return nil, fmt.Errorf("%s:%d: %w", name, line, err)
		}
		if t := bytes.TrimSpace(text); len(t) > 0 {
			req, perr := parseServeLine(t, defaultOutput)
			if perr != nil {
				return nil, fmt.Errorf("%s:%d: %s", name, line, perr)
			}
			out = append(out, req)
		}
		if err != nil {
			break
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%s: no prompts (one JSON object per line, with \"prompt\")", name)
	}
	return out, nil
}

func parseServeLine(t []byte, defaultOutput int) (ServeRequest, error) {
	if t[0] != '{' {
		return ServeRequest{}, errors.New(`not a JSON object (want {"prompt": "...", "output_len": N})`)
	}
	var d serveLine
	if err := json.Unmarshal(t, &d); err != nil {
		return ServeRequest{}, fmt.Errorf("invalid JSON: %v", err)
	}
	if d.Prompt == nil {
		return ServeRequest{}, errors.New(`no "prompt" field`)
	}
	if *d.Prompt == "" {
		return ServeRequest{}, errors.New(`"prompt" is empty`)
	}
	if d.OutputLen != nil && d.MaxTokens != nil && *d.OutputLen != *d.MaxTokens {
		return ServeRequest{}, errors.New(`"output_len" and "max_tokens" disagree`)
	}
	outLen := defaultOutput
	for _, p := range []*int{d.OutputLen, d.MaxTokens} {
		if p != nil {
			if *p < 1 {
				return ServeRequest{}, fmt.Errorf("output length %d: must be at least 1", *p)
			}
			outLen = *p
		}
	}
	return ServeRequest{Prompt: *d.Prompt, MaxTokens: outLen, InputLen: estimatePromptTokens(*d.Prompt)}, nil
}

// estimatePromptTokens guesses a prompt's token count when the server reports
// none: about four bytes a token, as for English text in BPE vocabularies.
func estimatePromptTokens(s string) int { return max(1, (len(s)+3)/4) }

// cycleServeRequests repeats reqs in order up to n requests.
func cycleServeRequests(reqs []ServeRequest, n int) []ServeRequest {
	out := make([]ServeRequest, n)
	for i := range out {
		out[i] = reqs[i%len(reqs)]
	}
	return out
}
