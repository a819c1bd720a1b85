package bench

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
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

// promptWords are common English words, each one token in the usual BPE
// vocabularies when preceded by a space, so that L of them make a prompt
// of about L tokens; the server's tokenizer decides the exact count.
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

// RandomPrompts makes n prompts of inputLen random words each (about
// inputLen tokens), each asking for outputLen tokens. The same seed gives
// the same prompts.
func RandomPrompts(n, inputLen, outputLen int, seed int64) []ServeRequest {
	rng := seededRand(seed, randPrompts)
	out := make([]ServeRequest, n)
	var b strings.Builder
	for i := range out {
		b.Reset()
		for j := range inputLen {
			if j > 0 {
				b.WriteByte(' ')
			}
			b.WriteString(promptWords[rng.IntN(len(promptWords))])
		}
		out[i] = ServeRequest{Prompt: b.String(), MaxTokens: outputLen, InputLen: inputLen}
	}
	return out
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
