package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"

	"ringlm/gguf"
	"ringlm/models"
	"ringlm/tokenizer"
)

// loadTokenizer opens a GGUF file ("" = the built-in model) and builds its
// tokenizer.
func loadTokenizer(path string) (*tokenizer.Tokenizer, *gguf.File, error) {
	f, err := openGGUF(path)
	if err != nil {
		return nil, nil, err
	}
	t, err := tokenizer.Load(f)
	if err == nil {
		return t, f, nil
	}
	f.Close()
	if path == "" {
		path = "the built-in model " + models.DefaultName
	}
	return nil, nil, fmt.Errorf("%s: %w", path, err)
}

func runTokenize(args []string, stdout, stderr io.Writer) error {
	return tokenizeWith(os.Stdin, args, stdout, stderr)
}

// maxJSONLLine bounds one input line of --jsonl.
const maxJSONLLine = 64 << 20

func tokenizeWith(stdin io.Reader, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("tokenize", "tokenize [-m FILE] [--jsonl] [--literal] [--add-special] [TEXT | stdin]")
	model := fs.String("m", "", "GGUF model or vocabulary file (default: the built-in "+models.DefaultName+" model's vocabulary)")
	jsonl := fs.Bool("jsonl", false, `read {"text": "..."} lines on stdin, write {"ids": [...]} lines; --literal and --add-special apply as in the plain mode`)
	literal := fs.Bool("literal", false, "take control-token strings in the text literally instead of matching them (user-defined tokens still match, as in llama.cpp and HF)")
	addSpecial := fs.Bool("add-special", false, "add BOS/EOS as the vocabulary asks")
	pos, err := parseFlags(fs, args)
	if err != nil {
		return err
	}
	tok, f, err := loadTokenizer(*model)
	if err != nil {
		return err
	}
	defer f.Close()
	// One rule in both modes: special tokens are matched unless --literal,
	// as HF's encode does.
	opts := tokenizer.EncodeOptions{ParseSpecial: !*literal, AddSpecial: *addSpecial}
	out := bufio.NewWriter(stdout)
	defer out.Flush()
	if *jsonl {
		sc := bufio.NewScanner(stdin)
		sc.Buffer(make([]byte, 1<<20), maxJSONLLine)
		line := 0
		for sc.Scan() {
			line++
			var in struct {
				Text *string `json:"text"`
			}
			if err := json.Unmarshal(sc.Bytes(), &in); err != nil || in.Text == nil {
				return fmt.Errorf(`stdin line %d: want {"text": "..."}`, line)
			}
			ids := tok.EncodeWith(*in.Text, opts)
			if ids == nil {
				ids = []int32{}
			}
			b, _ := json.Marshal(struct {
				IDs []int32 `json:"ids"`
			}{ids})
			out.Write(b)
			out.WriteByte('\n')
		}
		return sc.Err()
	}
	text := strings.Join(pos, " ")
	if len(pos) == 0 {
		b, err := io.ReadAll(io.LimitReader(stdin, maxJSONLLine))
		if err != nil {
			return err
		}
		text = string(b)
	}
	ids := tok.EncodeWith(text, opts)
	for _, id := range ids {
		fmt.Fprintf(out, "%8d  %q\n", id, tok.Decode([]int32{id}))
	}
	fmt.Fprintf(out, "%d tokens\n", len(ids))
	return nil
}
