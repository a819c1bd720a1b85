package hf

import (
	"os"
	"path/filepath"
	"strings"

	"ringlm/pull"
)

// Options say where the Hub and the cache are and how to download. Every
// empty field takes its value from the environment, as huggingface_hub
// reads it, so ringlm and the Hugging Face tools share one cache and one
// login.
type Options struct {
	// Endpoint is the Hub: HF_ENDPOINT, else https://huggingface.co.
	Endpoint string
	// Token is sent as a bearer token: HF_TOKEN, else the file
	// HF_TOKEN_PATH names, else $HF_HOME/token (what `hf auth login`
	// writes). "" and none of those: no token.
	Token string
	// CacheDir is the hub cache: HF_HUB_CACHE, else $HF_HOME/hub, else
	// $XDG_CACHE_HOME/huggingface/hub, else ~/.cache/huggingface/hub.
	CacheDir string
	// Offline resolves names from the cache alone, never asking the Hub;
	// HF_HUB_OFFLINE=1 sets it too.
	Offline bool
	// Transfer tunes downloads and carries the progress callback; its
	// Client makes the Hub's API calls too.
	Transfer pull.Options
}

const defaultEndpoint = "https://huggingface.co"

// withEnv fills o's empty fields from the environment.
func (o Options) withEnv() Options {
	if o.Endpoint == "" {
		o.Endpoint = os.Getenv("HF_ENDPOINT")
		if o.Endpoint == "" {
			o.Endpoint = defaultEndpoint
		}
	}
	o.Endpoint = strings.TrimRight(o.Endpoint, "/")
	if o.Token == "" {
		o.Token = envToken()
	}
	if o.CacheDir == "" {
		o.CacheDir = CacheDir()
	}
	o.Offline = o.Offline || isTrue(os.Getenv("HF_HUB_OFFLINE"))
	return o
}

// CacheDir is the hub cache the environment names (Options.CacheDir).
func CacheDir() string {
	if d := expandHome(os.Getenv("HF_HUB_CACHE")); d != "" {
		return d
	}
	if d := expandHome(os.Getenv("HUGGINGFACE_HUB_CACHE")); d != "" { // its name before HF_HUB_CACHE
		return d
	}
	return filepath.Join(hfHome(), "hub")
}

func hfHome() string {
	if d := expandHome(os.Getenv("HF_HOME")); d != "" {
		return d
	}
	if d := expandHome(os.Getenv("XDG_CACHE_HOME")); d != "" {
		return filepath.Join(d, "huggingface")
	}
	return filepath.Join(expandHome("~"), ".cache", "huggingface")
}

func envToken() string {
	for _, v := range []string{"HF_TOKEN", "HUGGING_FACE_HUB_TOKEN"} {
		if t := strings.TrimSpace(os.Getenv(v)); t != "" {
			return t
		}
	}
	path := expandHome(os.Getenv("HF_TOKEN_PATH"))
	if path == "" {
		path = filepath.Join(hfHome(), "token")
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}

// expandHome replaces a leading ~ with the home directory, as Python's
// expanduser does for these variables.
func expandHome(p string) string {
	if p != "~" && !strings.HasPrefix(p, "~/") {
		return p
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return p
	}
	return filepath.Join(home, p[1:])
}

func isTrue(v string) bool {
	switch strings.ToUpper(strings.TrimSpace(v)) {
	case "1", "ON", "YES", "TRUE":
		return true
	}
	return false
}
