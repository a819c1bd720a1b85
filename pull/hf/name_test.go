package hf

import (
	"errors"
	"strings"
	"testing"
)

func TestParseName(t *testing.T) {
	for in, want := range map[string]Name{
		"hf.co/bartowski/Llama-3.2-1B-Instruct-GGUF":                       {Repo: "bartowski/Llama-3.2-1B-Instruct-GGUF"},
		"hf.co/u/r:Q4_K_M":                                                 {Repo: "u/r", Quant: "Q4_K_M"},
		"huggingface.co/u/r:q8_0":                                          {Repo: "u/r", Quant: "q8_0"},
		"HF.co/u/r":                                                        {Repo: "u/r"},
		"https://huggingface.co/u/r":                                       {Repo: "u/r"},
		"https://huggingface.co/u/r/":                                      {Repo: "u/r"},
		"hf.co/u/r@main:Q4_K_M":                                            {Repo: "u/r", Quant: "Q4_K_M", Revision: "main"},
		"hf.co/u/r:Q4_K_M@v1.0":                                            {Repo: "u/r", Quant: "Q4_K_M", Revision: "v1.0"},
		"hf.co/u/r:UD-Q4_K_XL":                                             {Repo: "u/r", Quant: "UD-Q4_K_XL"},
		"hf.co/u/r/sub/model-Q4_K_M.gguf":                                  {Repo: "u/r", File: "sub/model-Q4_K_M.gguf"},
		"hf.co/u/r/model.GGUF@refs/pr/1":                                   {Repo: "u/r", File: "model.GGUF", Revision: "refs/pr/1"},
		"hf.co/u.x_y/r-1.5B@0123456789abcdef0123456789abcdef01234567":      {Repo: "u.x_y/r-1.5B", Revision: "0123456789abcdef0123456789abcdef01234567"},
		"https://huggingface.co/u/r/blob/main/m-Q4_K_M.gguf?download=true": {Repo: "u/r", File: "m-Q4_K_M.gguf", Revision: "main"},
		"https://huggingface.co/u/r/resolve/refs%2Fpr%2F1/Q8_0/m%2Bx.gguf": {Repo: "u/r", File: "Q8_0/m+x.gguf", Revision: "refs/pr/1"},
	} {
		got, err := ParseName(in)
		if err != nil || got != want {
			t.Errorf("ParseName(%q) = %+v, %v; want %+v", in, got, err, want)
		}
		if !IsName(in) {
			t.Errorf("IsName(%q) is false", in)
		}
	}
}

func TestParseNameRefuses(t *testing.T) {
	for in, why := range map[string]string{
		"":                                   "starts with hf.co/",
		"hf.co":                              "starts with hf.co/",
		"example.com/u/r":                    "starts with hf.co/",
		"hf.co/u":                            "want hf.co/{user}/{repo}",
		"hf.co/u/":                           "repository name is empty",
		"hf.co//r":                           "user name is empty",
		"hf.co/u/r:":                         "quant tag",
		"hf.co/u/r:Q4@main:Q5":               "two quant tags",
		"hf.co/u/r:Q4/x.gguf":                "quant tag",
		"hf.co/u/r@":                         "nothing after '@'",
		"hf.co/u/r@a..b":                     "git does not allow",
		"hf.co/u/r@/main":                    "empty part",
		"hf.co/u/r/x.bin":                    "must be a .gguf file",
		"hf.co/u/r/.gguf":                    "must be a .gguf file",
		"hf.co/u/r/a/../x.gguf":              "'..'",
		"hf.co/u/r/x.gguf:Q4":                "give one",
		"hf.co/-u/r":                         "starts or ends",
		"hf.co/u--v/r":                       "'--'",
		"hf.co/u/r!":                         "only letters",
		"hf.co/u r/x":                        "space",
		"hf.co/u/r\n":                        "control",
		"hf.co/u/r/blob/main/x.gguf@v":       "two revisions",
		"hf.co/u/" + strings.Repeat("r", 95): "96 characters",
	} {
		_, err := ParseName(in)
		if !errors.Is(err, ErrBadName) || !strings.Contains(err.Error(), why) || strings.Contains(err.Error(), "\n") {
			t.Errorf("ParseName(%q): %v; want an error saying %q", in, err, why)
		}
	}
	for _, s := range []string{"", "hf.co", "llama3.2", "./hf.co/x/y", "/models/hf.co/u/r.gguf", "ollama.com/library/llama3"} {
		if IsName(s) {
			t.Errorf("IsName(%q) is true", s)
		}
	}
}

func TestNameStringRoundTrips(t *testing.T) {
	for _, n := range []Name{
		{Repo: "u/r"},
		{Repo: "u/r", Quant: "Q4_K_M"},
		{Repo: "u/r", Quant: "q8_0", Revision: "refs/pr/3"},
		{Repo: "u/r", File: "a/b-Q4_0.gguf", Revision: "v2"},
	} {
		got, err := ParseName(n.String())
		if err != nil || got != n {
			t.Errorf("ParseName(%q) = %+v, %v", n.String(), got, err)
		}
	}
}

func FuzzParseName(f *testing.F) {
	for _, s := range []string{
		"hf.co/u/r", "hf.co/u/r:Q4_K_M@main", "hf.co/u/r@main:Q4_K_M", "hf.co/u/r/a/b.gguf@refs/pr/1",
		"https://huggingface.co/u/r/resolve/refs%2Fpr%2F1/x%20y.gguf?download=true", "hf.co/u/r:", "hf.co/u/r/blob/x",
		"HTTP://WWW.HUGGINGFACE.CO/u/r/blob/%zz/x.gguf", "hf.co/u/r@a@{b}", "hf.co/u/r/x.gguf@v:q",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		n, err := ParseName(s)
		if err != nil {
			if !errors.Is(err, ErrBadName) || strings.Contains(err.Error(), "\n") {
				t.Fatalf("%q: %v", s, err)
			}
			return
		}
		if !IsName(s) {
			t.Fatalf("%q parses but IsName is false", s)
		}
		if strings.Count(n.Repo, "/") != 1 || (n.File != "" && checkFile(n.File) != "") || (n.File != "" && n.Quant != "") {
			t.Fatalf("%q: %+v", s, n)
		}
		back, err := ParseName(n.String())
		if err != nil || back != n {
			t.Fatalf("%q → %+v → %q → %+v, %v", s, n, n.String(), back, err)
		}
	})
}
