package main

import (
	"bytes"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"

	"ringlm/gguf"
	"ringlm/tokenizer"
)

// maxTokenizerJSON bounds what is read from a tokenizer.json (the largest
// real ones, o200k vocabularies, are about 30 MB).
const maxTokenizerJSON = 256 << 20

// importTokenizer reads a vocabulary into GGUF tokenizer metadata: a
// HuggingFace tokenizer.json (with the tokenizer_config.json beside it,
// as llama.cpp's converter reads them) or the vocabulary of an existing
// GGUF file; either may be gzipped.
func importTokenizer(path string) ([]gguf.KV, error) {
	data, err := readMaybeGzip(path)
	if err != nil {
		return nil, err
	}
	if bytes.HasPrefix(data, []byte(gguf.Magic)) {
		f, err := gguf.Parse(data)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		v, err := tokenizer.FromGGUF(f)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		return v.Metadata(), nil
	}
	cfg, err := readMaybeGzip(filepath.Join(filepath.Dir(path), "tokenizer_config.json"))
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, err
	}
	v, err := tokenizer.FromHFJSON(data, cfg)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if _, err := tokenizer.New(v); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return v.Metadata(), nil
}

func readMaybeGzip(path string) ([]byte, error) {
	fh, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer fh.Close()
	b, err := io.ReadAll(io.LimitReader(fh, maxTokenizerJSON+1))
	if err != nil {
		return nil, err
	}
	if len(b) >= 2 && b[0] == 0x1f && b[1] == 0x8b {
		zr, err := gzip.NewReader(bytes.NewReader(b))
		if err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		if b, err = io.ReadAll(io.LimitReader(zr, maxTokenizerJSON+1)); err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
	}
	if len(b) > maxTokenizerJSON {
		return nil, fmt.Errorf("%s: larger than %d MiB", path, maxTokenizerJSON>>20)
	}
	return b, nil
}
