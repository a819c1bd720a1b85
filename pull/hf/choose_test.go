package hf

import (
	"errors"
	"strings"
	"testing"

	"ringlm/pull"
)

func TestChoose(t *testing.T) {
	bartowski := []string{
		".gitattributes", "README.md", "Llama-3.2-1B-Instruct-f16.gguf", "Llama-3.2-1B-Instruct-IQ4_XS.gguf",
		"Llama-3.2-1B-Instruct-Q4_0.gguf", "Llama-3.2-1B-Instruct-Q4_0_4_4.gguf", "Llama-3.2-1B-Instruct-Q4_K_M.gguf",
		"Llama-3.2-1B-Instruct-Q4_K_S.gguf", "Llama-3.2-1B-Instruct-Q8_0.gguf", "Llama-3.2-1B-Instruct.imatrix",
	}
	for _, tc := range []struct {
		name  string
		files []string
		want  string
	}{
		{"hf.co/u/r", bartowski, "Llama-3.2-1B-Instruct-Q4_K_M.gguf"},
		{"hf.co/u/r:q8_0", bartowski, "Llama-3.2-1B-Instruct-Q8_0.gguf"},
		{"hf.co/u/r:Q4_0", bartowski, "Llama-3.2-1B-Instruct-Q4_0.gguf"},       // not Q4_0_4_4
		{"hf.co/u/r:F16", []string{"m-BF16.gguf", "m-F16.gguf"}, "m-F16.gguf"}, // not BF16
		{"hf.co/u/r:BF16", []string{"m-BF16.gguf", "m-F16.gguf"}, "m-BF16.gguf"},
		{"hf.co/u/r:IQ4", bartowski, "Llama-3.2-1B-Instruct-IQ4_XS.gguf"}, // bounded by '_'
		{"hf.co/u/r:xs", bartowski, "Llama-3.2-1B-Instruct-IQ4_XS.gguf"},  // as a substring
		{"hf.co/u/r/Llama-3.2-1B-Instruct-Q4_0_4_4.gguf", bartowski, "Llama-3.2-1B-Instruct-Q4_0_4_4.gguf"},
		{"hf.co/u/r", []string{"only.gguf", "README.md"}, "only.gguf"},
		{"hf.co/u/r", []string{"b-Q8_0.gguf", "a-Q5_K_M.gguf"}, "a-Q5_K_M.gguf"}, // no Q4_K_M: the first
		{"hf.co/u/r", []string{"mmproj-model-f16.gguf", "model-Q8_0.gguf"}, "model-Q8_0.gguf"},
		{"hf.co/u/r:Q4_K_M", []string{"Q4_K_M/m-Q4_K_M.gguf", "Q8_0/m-Q8_0.gguf"}, "Q4_K_M/m-Q4_K_M.gguf"},
		{"hf.co/u/r:UD-Q4_K_XL", []string{"m-UD-Q4_K_XL.gguf", "m-Q4_K_M.gguf"}, "m-UD-Q4_K_XL.gguf"},
	} {
		n, err := ParseName(tc.name)
		if err != nil {
			t.Fatal(err)
		}
		got, err := Choose(n, tc.files)
		if err != nil || got != tc.want {
			t.Errorf("Choose(%s) = %q, %v; want %q", tc.name, got, err, tc.want)
		}
	}
}

func TestChooseRefuses(t *testing.T) {
	for _, tc := range []struct {
		name  string
		files []string
		kind  error
		says  []string
	}{
		{"hf.co/u/r:Q4_K", []string{"m-Q4_K_M.gguf", "m-Q4_K_S.gguf", "m-Q8_0.gguf"}, ErrAmbiguous,
			[]string{"hf.co/u/r:Q4_K is ambiguous: it matches m-Q4_K_M.gguf, m-Q4_K_S.gguf; name one: hf.co/u/r:Q4_K_M or hf.co/u/r:Q4_K_S"}},
		{"hf.co/u/r", []string{"a/m-Q4_K_M.gguf", "b/m-Q4_K_M.gguf"}, ErrAmbiguous,
			[]string{"(:Q4_K_M) is ambiguous", "hf.co/u/r/a/m-Q4_K_M.gguf or hf.co/u/r/b/m-Q4_K_M.gguf"}},
		{"hf.co/u/r", []string{"model.safetensors", "config.json", "mmproj-f16.gguf"}, ErrNoGGUF,
			[]string{"hf.co/u/r has no GGUF files", "…-GGUF"}},
		{"hf.co/u/r:Q3_K_L", []string{"m-Q4_K_M.gguf", "m-Q8_0.gguf"}, pull.ErrNotFound,
			[]string{"hf.co/u/r:Q3_K_L matches no file; its GGUF files: m-Q4_K_M.gguf, m-Q8_0.gguf"}},
		{"hf.co/u/r/x.gguf", []string{"m-Q4_K_M.gguf"}, pull.ErrNotFound, []string{"no such file in u/r"}},
		{"hf.co/u/r:Q8_0", []string{"Q8_0/m-Q8_0-00001-of-00003.gguf", "Q8_0/m-Q8_0-00002-of-00003.gguf", "Q8_0/m-Q8_0-00003-of-00003.gguf", "m-Q4_K_M.gguf"},
			ErrSplit, []string{"is split in 3 files", "llama-gguf-split --merge"}},
		{"hf.co/u/r", []string{"m-Q4_K_M-00002-of-00002.gguf", "m-Q4_K_M-00001-of-00002.gguf"}, ErrSplit,
			[]string{"m-Q4_K_M-00001-of-00002.gguf"}},
	} {
		n, err := ParseName(tc.name)
		if err != nil {
			t.Fatal(err)
		}
		got, err := Choose(n, tc.files)
		if !errors.Is(err, tc.kind) || strings.Contains(err.Error(), "\n") {
			t.Errorf("Choose(%s) = %q, %v; want %v", tc.name, got, err, tc.kind)
			continue
		}
		for _, s := range tc.says {
			if !strings.Contains(err.Error(), s) {
				t.Errorf("Choose(%s): %q does not say %q", tc.name, err, s)
			}
		}
	}
}

func TestQuantOf(t *testing.T) {
	for file, want := range map[string]string{
		"Llama-3.2-1B-Instruct-Q4_K_M.gguf":   "Q4_K_M",
		"qwen2.5-0.5b-instruct-q8_0.gguf":     "Q8_0",
		"model_q5_k_s.gguf":                   "Q5_K_S",
		"Meta-Llama-3.1-8B-Instruct-f16.gguf": "F16",
		"m-BF16.gguf":                         "BF16",
		"m-IQ2_XXS.gguf":                      "IQ2_XXS",
		"m-Q4_0_4_4.gguf":                     "Q4_0_4_4",
		"Qwen3-30B-A3B-UD-Q4_K_XL.gguf":       "UD-Q4_K_XL",
		"Q8_0/m-Q8_0-00001-of-00002.gguf":     "Q8_0",
		"gpt-oss-20b-MXFP4.gguf":              "MXFP4",
		"qwen2-7b.gguf":                       "",
		"model.gguf":                          "",
	} {
		if got := QuantOf(file); got != want {
			t.Errorf("QuantOf(%q) = %q, want %q", file, got, want)
		}
	}
}
