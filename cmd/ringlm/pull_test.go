package main

import (
	"bufio"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"ringlm/gguf"
	"ringlm/internal/testmodel"
	"ringlm/pull"
	"ringlm/pull/ollama"
	"ringlm/pull/pulltest"
)

// pullEnv is a fake Hugging Face Hub and a fake Ollama registry on
// loopback, with the HF cache and the Ollama store in the test's
// temporary directory: nothing a test does reaches the internet or the
// user's home.
type pullEnv struct {
	hub     *pulltest.Hub
	reg     *pulltest.Registry
	hfCache string
	store   string
	gguf    []byte // the tiny Q8_0 model
}

func newPullEnv(t testing.TB) *pullEnv {
	t.Helper()
	dir := t.TempDir()
	e := &pullEnv{hub: pulltest.NewHub(t), reg: pulltest.NewRegistry(t), hfCache: filepath.Join(dir, "hf", "hub"), store: filepath.Join(dir, "models")}
	for k, v := range map[string]string{
		"HF_HOME": filepath.Join(dir, "hf"), "HF_HUB_CACHE": e.hfCache, "HF_ENDPOINT": e.hub.URL(), "HF_TOKEN": "",
		"HUGGING_FACE_HUB_TOKEN": "", "HF_HUB_OFFLINE": "", "RINGLM_MODELS": e.store, "RINGLM_REGISTRY": e.reg.URL(),
		"RINGLM_OFFLINE": "", "RINGLM_INSECURE": "",
	} {
		t.Setenv(k, v)
	}
	var err error
	if e.gguf, err = os.ReadFile(testmodel.Path(t, "llama", gguf.TypeQ8_0)); err != nil {
		t.Fatal(err)
	}
	return e
}

// The layers of an Ollama model around the tiny GGUF: a ChatML template,
// a system prompt, and params of which mirostat is one ringlm lacks.
const (
	testTemplate = `{{- range .Messages }}<|im_start|>{{ .Role }}
{{ .Content }}<|im_end|>
{{ end }}<|im_start|>assistant
`
	testSystem = "You are a test."
	testParams = `{"temperature":0,"num_predict":6,"stop":["<|im_end|>"],"mirostat":0,"num_ctx":256}`
)

func (e *pullEnv) pushLayers() []pulltest.Layer {
	return []pulltest.Layer{
		{MediaType: ollama.MediaTypeModel, Data: e.gguf},
		{MediaType: ollama.MediaTypeTemplate, Data: []byte(testTemplate)},
		{MediaType: ollama.MediaTypeSystem, Data: []byte(testSystem)},
		{MediaType: ollama.MediaTypeParams, Data: []byte(testParams)},
	}
}

func (e *pullEnv) pushOllama(repo, tag string) []byte {
	return e.reg.Push(repo, tag, e.pushLayers()...)
}

// wantFailure checks a failed command: a non-zero exit and, last on
// stderr, one line "ringlm CMD: ..." holding want.
func wantFailure(t *testing.T, want string, args ...string) {
	t.Helper()
	code, _, stderr := runCmd(t, args...)
	lines := strings.Split(strings.TrimSuffix(stderr, "\n"), "\n")
	last := lines[len(lines)-1]
	if code == 0 || !strings.HasSuffix(stderr, "\n") || !strings.HasPrefix(last, "ringlm "+args[0]+": ") || !strings.Contains(last, want) {
		t.Errorf("%q: exit %d, stderr %q; want a failure and one line with %q", args, code, stderr, want)
	}
}

type listJSON struct {
	Models []listed
}

func listModels(t testing.TB) []listed {
	t.Helper()
	code, out, errOut := runCmd(t, "list", "--json")
	var l listJSON
	if err := json.Unmarshal([]byte(out), &l); err != nil || code != 0 {
		t.Fatalf("list --json: exit %d, %v, %s", code, err, errOut)
	}
	return l.Models
}

// statuses are the statuses of pull's JSON lines.
func statuses(t *testing.T, out string) []string {
	t.Helper()
	var st []string
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		var ev pull.Event
		if err := json.Unmarshal([]byte(line), &ev); err != nil {
			t.Fatalf("not a JSON line: %q", line)
		}
		if len(st) == 0 || st[len(st)-1] != ev.Status {
			st = append(st, ev.Status)
		}
	}
	return st
}

// A Hub model: pull (JSON progress off a terminal), list with the
// header's quantization, show, run by name without the network, rm.
func TestPullHubModel(t *testing.T) {
	e := newPullEnv(t)
	e.hub.Push("test/Tiny-GGUF", map[string][]byte{"tiny-Q8_0.gguf": e.gguf, "README.md": []byte("# tiny")})
	const name = "hf.co/test/Tiny-GGUF:Q8_0"

	code, out, errOut := runCmd(t, "pull", name)
	if code != 0 || errOut != "" {
		t.Fatalf("pull: exit %d, %s", code, errOut)
	}
	if st := statuses(t, out); st[0] != "pulling manifest" || st[len(st)-1] != "success" {
		t.Errorf("pull's JSON lines: %v", st)
	}
	if n := e.hub.CDN.Served(); n != int64(len(e.gguf)) {
		t.Errorf("the CDN served %d bytes, want the file's %d", n, len(e.gguf))
	}

	models := listModels(t)
	if len(models) != 1 || models[0].Name != name || models[0].Quant != "Q8_0" || models[0].Size != int64(len(e.gguf)) ||
		models[0].Source != "hf" || models[0].ID != pulltest.Digest(e.gguf)[:12] {
		t.Fatalf("list: %+v", models)
	}
	code, out, _ = runCmd(t, "list")
	if lines := strings.Split(strings.TrimSpace(out), "\n"); code != 0 || len(lines) != 2 || !strings.HasPrefix(lines[0], "NAME") ||
		!strings.Contains(lines[1], name) || !strings.Contains(lines[1], "Q8_0") || !strings.Contains(lines[1], "MB") {
		t.Errorf("list: exit %d\n%s", code, out)
	}
	code, out, _ = runCmd(t, "show", name)
	if code != 0 || !strings.HasPrefix(out, "model ") || !slices.Contains(fields(out, "model"), name) ||
		!slices.Contains(fields(out, "digest"), "sha256:"+pulltest.Digest(e.gguf)) || !slices.Contains(fields(out, "architecture"), "llama") {
		t.Errorf("show %s: exit %d\n%.600s", name, code, out)
	}

	// A pulled name starts with no request to the Hub, offline or not.
	hubBefore, cdnBefore := len(e.hub.Requests()), e.hub.CDN.Served()
	for _, args := range [][]string{{"run", name, "-p", "The ring", "-n", "4"}, {"run", "-m", name, "-p", "The ring", "-n", "4", "--offline"}} {
		if code, out, errOut := runCmd(t, args...); code != 0 || out == "" {
			t.Errorf("%q: exit %d, %s", args, code, errOut)
		}
	}
	if n := len(e.hub.Requests()); n != hubBefore || e.hub.CDN.Served() != cdnBefore {
		t.Errorf("running a pulled name asked the Hub %d times", n-hubBefore)
	}
	// Pulled again: the Hub is asked, the file is not downloaded again.
	if code, _, errOut := runCmd(t, "pull", name); code != 0 || e.hub.CDN.Served() != cdnBefore {
		t.Errorf("second pull: exit %d, %d bytes more (%s)", code, e.hub.CDN.Served()-cdnBefore, errOut)
	}

	code, out, errOut = runCmd(t, "rm", name)
	if code != 0 || !strings.HasPrefix(out, "deleted '"+name+"' (") {
		t.Fatalf("rm: exit %d, %q %q", code, out, errOut)
	}
	if models := listModels(t); len(models) != 0 {
		t.Errorf("list after rm: %+v", models)
	}
	wantFailure(t, "hf.co/test/Tiny-GGUF:Q8_0 is not pulled and --offline is set: run 'ringlm pull hf.co/test/Tiny-GGUF:Q8_0' first",
		"run", name, "-p", "x", "--offline")
	wantFailure(t, "is not pulled: run 'ringlm pull", "show", name)
	wantFailure(t, "is not in the cache", "rm", name)
}

// An Ollama model pulled on run's first use (RINGLM_REGISTRY stands for
// registry.ollama.ai): its template wraps the prompt, its params are the
// defaults (greedy, 6 tokens, a stop string), the params ringlm lacks
// are named, and the second run is offline.
func TestRunOllamaModel(t *testing.T) {
	e := newPullEnv(t)
	e.pushOllama("library/tiny", "latest")
	wantFailure(t, "tiny is not pulled and --offline is set", "run", "tiny", "-p", "x", "--offline")

	code, out, errOut := runCmd(t, "run", "tiny", "Say", "hi")
	if code != 0 {
		t.Fatalf("run tiny: exit %d, %s", code, errOut)
	}
	for _, want := range []string{"ringlm run: tiny is not pulled yet; pulling it", "ignoring the model's parameters mirostat (", "finish reason = "} {
		if !strings.Contains(errOut, want) {
			t.Errorf("run's stderr does not say %q:\n%s", want, errOut)
		}
	}
	requests := len(e.reg.Requests())
	code, again, errAgain := runCmd(t, "run", "tiny", "-p", "Say hi", "--offline")
	if code != 0 || again != out {
		t.Errorf("the model's temperature 0: %q then %q (%s)", out, again, errAgain)
	}
	if n := len(e.reg.Requests()); n != requests {
		t.Errorf("an offline run asked the registry %d times", n-requests)
	}
	// The model's num_predict bounds the answer: 6 tokens at most, the
	// first and at most 5 after it.
	if m := regexp.MustCompile(`eval\s+=\s+[\d.]+ ms /\s+(\d+) tokens`).FindStringSubmatch(errOut); m != nil && m[1] > "5" {
		t.Errorf("more than the model's 6 tokens:\n%s", errOut)
	}
	// A flag beats the model's param: -n 9 and ignoring the end.
	if code, _, errOut := runCmd(t, "run", "tiny", "-p", "Say hi", "-n", "9", "--ignore-eos", "--offline"); code != 0 || !strings.Contains(errOut, "/    8 tokens") {
		t.Errorf("-n 9 over the model's num_predict: exit %d\n%s", code, errOut)
	}

	code, out, _ = runCmd(t, "show", "tiny")
	for key, want := range map[string]string{"model": "tiny", "system": `"You are a test."`, "parameter": `stop ["<|im_end|>"]`} {
		if code != 0 || !slices.Contains(fields(out, key), want) {
			t.Errorf("show tiny: %s is %q, want %q among them:\n%.800s", key, fields(out, key), want, out)
		}
	}
	if tm := fields(out, "template"); len(tm) != 1 || !strings.HasPrefix(tm[0], `"{{- range .Messages }}`) {
		t.Errorf("show tiny: template %q", tm)
	}
}

// fields are the values of show's lines of key, in its first table.
func fields(out, key string) []string {
	var vals []string
	for _, m := range regexp.MustCompile(`(?m)^`+regexp.QuoteMeta(key)+` +(.*)$`).FindAllStringSubmatch(out, -1) {
		vals = append(vals, m[1])
	}
	return vals
}

// serve -m NAME, twice: names served as written (pulled on first load),
// the Ollama model's template rendering with its system prompt and its
// params as the request's defaults.
func TestServeByName(t *testing.T) {
	e := newPullEnv(t)
	manifest := e.pushOllama("library/tiny", "latest")
	e.hub.Push("test/Tiny-GGUF", map[string][]byte{"tiny-Q8_0.gguf": e.gguf})
	const hubName = "hf.co/test/Tiny-GGUF:Q8_0"

	base, logs := startServe(t, "-m", "tiny", "-m", hubName, "--port", "0", "--log-format", "json", "--kv-blocks", "64")
	var list struct{ Data []struct{ ID string } }
	if code := getJSON(t, base+"/v1/models", &list); code != 200 || len(list.Data) != 2 || list.Data[0].ID != "tiny" || list.Data[1].ID != hubName {
		t.Fatalf("/v1/models: %d %+v", code, list)
	}
	if !strings.Contains(logs.String(), `"model":"tiny",`) || !strings.Contains(logs.String(), `"message":"not pulled yet: pulling it (--offline refuses)"`) ||
		!strings.Contains(logs.String(), "tiny:latest: ignoring the model's parameters mirostat") {
		t.Errorf("no pull or params note in the log:\n%s", tail(logs.String(), 2000))
	}

	resp, err := http.Post(base+"/apply-template", "application/json", strings.NewReader(`{"model":"tiny","messages":[{"role":"user","content":"Hi"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	var at struct{ Prompt string }
	json.NewDecoder(resp.Body).Decode(&at)
	resp.Body.Close()
	want := "<|im_start|>system\n" + testSystem + "<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n"
	if resp.StatusCode != 200 || at.Prompt != want {
		t.Errorf("/apply-template with the Ollama template: %d %q, want %q", resp.StatusCode, at.Prompt, want)
	}

	type comp struct {
		Choices []struct{ Text string }
		Usage   struct {
			CompletionTokens int `json:"completion_tokens"`
		}
	}
	complete := func(body string) comp {
		t.Helper()
		resp, err := http.Post(base+"/v1/completions", "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var c comp
		if err := json.NewDecoder(resp.Body).Decode(&c); err != nil || resp.StatusCode != 200 || len(c.Choices) != 1 {
			t.Fatalf("%s: %d %v", body, resp.StatusCode, err)
		}
		return c
	}
	a, b := complete(`{"model":"tiny","prompt":"The ring","ignore_eos":true}`), complete(`{"model":"tiny","prompt":"The ring","ignore_eos":true}`)
	if a.Choices[0].Text != b.Choices[0].Text || a.Usage.CompletionTokens > 6 {
		t.Errorf("the model's temperature 0 and num_predict 6: %+v then %+v", a, b)
	}
	if c := complete(`{"model":"tiny","prompt":"The ring","ignore_eos":true,"max_tokens":9,"stop":[]}`); c.Usage.CompletionTokens != 9 {
		t.Errorf("max_tokens 9 over the model's num_predict: %+v", c)
	}
	var ps struct {
		Models []struct{ Name, Digest string }
	}
	if code := getJSON(t, base+"/api/ps", &ps); code != 200 || len(ps.Models) != 1 || ps.Models[0].Name != "tiny" || ps.Models[0].Digest != pulltest.Digest(manifest) {
		t.Errorf("/api/ps: %d %+v, want tiny's manifest digest %s", code, ps, pulltest.Digest(manifest))
	}
	if c := complete(`{"model":"` + hubName + `","prompt":"The ring","max_tokens":2}`); len(c.Choices) != 1 {
		t.Errorf("the Hub model: %+v", c)
	}
	if n := e.hub.CDN.Served(); n != int64(len(e.gguf)) {
		t.Errorf("the Hub model's first load downloaded %d bytes, want %d", n, len(e.gguf))
	}

	// --offline: a name that is not pulled stops serve with one line.
	wantFailure(t, "nothere is not pulled and --offline is set", "serve", "-m", "nothere", "--offline", "--port", "0")
}

// Every way a pull fails is one line, a non-zero exit, and nothing in
// the caches that list or run would take for a model.
func TestPullFailures(t *testing.T) {
	e := newPullEnv(t)
	e.hub.Push("test/NoGGUF", map[string][]byte{"README.md": []byte("# none"), "model.safetensors": []byte("x")})
	e.hub.Push("test/Two", map[string][]byte{"a-Q4_0.gguf": []byte("a"), "b-Q4_0.gguf": []byte("b")})
	e.hub.Push("test/Corrupt", map[string][]byte{"c-Q8_0.gguf": e.gguf})
	e.hub.CDN.Corrupt("/"+pulltest.Digest(e.gguf), 1000)
	data, blobs := pulltest.Manifest(pulltest.Layer{MediaType: ollama.MediaTypeModel, Data: []byte("GGUF, they say")})
	huge := strings.Replace(string(data), `"size": 14`, `"size": 1152921504606846976`, 1)
	e.reg.PushManifest("library/huge", "latest", []byte(huge), blobs)
	closed := httptest.NewServer(http.NotFoundHandler())
	closed.Close() // nothing listens there any more

	restore := map[string]string{"HF_ENDPOINT": e.hub.URL(), "RINGLM_REGISTRY": e.reg.URL()}
	for _, c := range []struct {
		args []string
		want string
		env  map[string]string
	}{
		{[]string{"pull", "hf.co/test/Missing"}, "hf.co/test/Missing: no such repository, or it is private or gated and needs a token", nil},
		{[]string{"pull", "hf.co/test/NoGGUF"}, "no GGUF files", nil},
		{[]string{"pull", "hf.co/test/Two:Q4_0"}, "a-Q4_0.gguf, b-Q4_0.gguf", nil},
		{[]string{"pull", "hf.co/test/Corrupt:Q8_0"}, "sha256 mismatch", nil},
		{[]string{"pull", "hf.co/test/Tiny"}, "connection refused", map[string]string{"HF_ENDPOINT": closed.URL}},
		{[]string{"pull", "nosuch:7b"}, "registry.ollama.ai/library/nosuch:7b", nil},
		{[]string{"pull", "huge"}, "not enough disk space", nil},
		{[]string{"pull", "tiny"}, "connection refused", map[string]string{"RINGLM_REGISTRY": closed.URL}},
		{[]string{"pull", "Not A Name"}, `"Not A Name" is neither a file nor a model name`, nil},
		{[]string{"pull", "hf.co/only-user"}, "hf.co/only-user", nil},
		{[]string{"run", "./nothere.gguf", "-p", "x"}, "nothere.gguf: no such file", nil},
		{[]string{"run", "Not A Name", "-p", "x"}, "is neither a file nor a model name", nil},
		{[]string{"rm", "Not A Name"}, "is neither a file nor a model name", nil},
	} {
		for k, v := range c.env {
			t.Setenv(k, v)
		}
		wantFailure(t, c.want, c.args...)
		for k := range c.env {
			t.Setenv(k, restore[k])
		}
	}
	e.reg.Fail(http.StatusUnauthorized, `{"errors":[{"code":"UNAUTHORIZED","message":"authentication required"}]}`)
	wantFailure(t, "401 Unauthorized", "pull", "someone/private")
	if models := listModels(t); len(models) != 0 {
		t.Errorf("failed pulls left models: %+v", models)
	}
	wantFailure(t, "is not pulled", "show", "hf.co/test/Corrupt:Q8_0")
}

// Faults a pull survives: a connection dropped mid-file (resumed from the
// byte it was cut at, by Range) and a slow part, behind the Hub's and the
// registry's redirects.
func TestPullSurvivesFaults(t *testing.T) {
	e := newPullEnv(t)
	e.hub.Push("test/Tiny-GGUF", map[string][]byte{"tiny-Q8_0.gguf": e.gguf})
	path := "/" + pulltest.Digest(e.gguf)
	e.hub.CDN.Inject(pulltest.Fault{Match: pulltest.Path(path), Drop: true, After: 1 << 20, Times: 1})
	if code, _, errOut := runCmd(t, "pull", "hf.co/test/Tiny-GGUF:Q8_0"); code != 0 {
		t.Fatalf("pull with a dropped connection: exit %d, %s", code, errOut)
	}
	reqs := e.hub.CDN.Requests()
	if n := e.hub.CDN.Served(); len(reqs) != 2 || reqs[1].Range != "bytes=1048576-"+strconv.Itoa(len(e.gguf)-1) || n != int64(len(e.gguf)) {
		t.Errorf("CDN requests %+v, %d bytes; want the second from the byte the first was cut at, no byte twice", reqs, n)
	}

	e.pushOllama("library/tiny", "latest")
	e.reg.CDN.Inject(pulltest.Fault{Match: pulltest.Path(path), Slow: 100 * time.Microsecond})
	if code, _, errOut := runCmd(t, "pull", "tiny"); code != 0 {
		t.Fatalf("pull with a slow part: exit %d, %s", code, errOut)
	}
	if models := listModels(t); len(models) != 2 {
		t.Errorf("list: %+v", models)
	}
}

// The test: a pull killed halfway (SIGKILL, no cleanup) resumes,
// and the next pull transfers only the rest, counted in bytes served.
func TestPullKilledResumes(t *testing.T) {
	e := newPullEnv(t)
	e.hub.Push("test/Tiny-GGUF", map[string][]byte{"tiny-Q8_0.gguf": e.gguf})
	half := int64(len(e.gguf) / 2)
	e.hub.CDN.Inject(pulltest.Fault{Stall: true, After: half, Times: 1})

	cmd := exec.Command(os.Args[0], "pull", "hf.co/test/Tiny-GGUF:Q8_0")
	cmd.Env = append(os.Environ(), "RINGLM_TEST_MAIN=1")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	sidecar := filepath.Join(e.hfCache, "models--test--Tiny-GGUF", "blobs", pulltest.Digest(e.gguf)+pull.PartialSuffix+".json")
	for deadline := time.Now().Add(time.Minute); kept(sidecar) < half; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			cmd.Process.Kill()
			t.Fatalf("the sidecar never claimed half the file (%d of %d bytes)", kept(sidecar), half)
		}
	}
	cmd.Process.Signal(syscall.SIGKILL)
	cmd.Wait()
	if models := listModels(t); len(models) != 0 {
		t.Fatalf("a killed pull left a model: %+v", models)
	}
	first := e.hub.CDN.Served()
	e.hub.CDN.Clear()
	if code, _, errOut := runCmd(t, "pull", "hf.co/test/Tiny-GGUF:Q8_0"); code != 0 {
		t.Fatalf("resumed pull: exit %d, %s", code, errOut)
	}
	if rest := e.hub.CDN.Served() - first; rest != int64(len(e.gguf))-half {
		t.Errorf("the resumed pull transferred %d bytes, want the %d the killed one had not", rest, int64(len(e.gguf))-half)
	}
	if models := listModels(t); len(models) != 1 || models[0].Quant != "Q8_0" {
		t.Errorf("list: %+v", models)
	}
}

// kept is the bytes a sidecar claims; 0 when it cannot be read yet.
func kept(path string) int64 {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0
	}
	var sc struct{ Done [][2]int64 }
	if json.Unmarshal(b, &sc) != nil {
		return 0
	}
	var n int64
	for _, d := range sc.Done {
		n += d[1] - d[0]
	}
	return n
}

// ^C during an Ollama pull (a SIGINT to this process when the progress
// passes half the model): exit 130 and one line saying what was kept;
// the next pull transfers the rest.
func TestPullInterrupted(t *testing.T) {
	e := newPullEnv(t)
	_, blobs := pulltest.Manifest(e.pushLayers()...)
	e.pushOllama("library/tiny", "latest")
	blob := "/" + pulltest.Digest(e.gguf)
	half := int64(len(e.gguf) / 2)
	e.reg.CDN.Inject(pulltest.Fault{Match: pulltest.Path(blob), Stall: true, After: half, Times: 1})
	stdout := &signalAt{at: half, digest: "sha256:" + pulltest.Digest(e.gguf)}
	var stderr lockedBuffer
	code := run([]string{"pull", "tiny"}, stdout, &stderr)
	if stdout.err != nil {
		t.Fatal(stdout.err)
	}
	if code != 130 || !strings.HasPrefix(stderr.String(), "ringlm pull: ") || !strings.Contains(stderr.String(), "the next pull resumes") ||
		strings.Count(stderr.String(), "\n") != 1 {
		t.Fatalf("interrupted pull: exit %d, %q", code, stderr.String())
	}
	if _, err := ollama.Resolve(e.store, "tiny"); err == nil {
		t.Fatal("an interrupted pull left a model")
	}
	first := e.reg.CDN.Served()
	e.reg.CDN.Clear()
	if code, _, errOut := runCmd(t, "pull", "tiny"); code != 0 {
		t.Fatalf("resumed pull: exit %d, %s", code, errOut)
	}
	// The GGUF's second half, and the small layers that come after it.
	var total int64
	for _, b := range blobs {
		total += int64(len(b))
	}
	if rest := e.reg.CDN.Served() - first; rest != total-half {
		t.Errorf("the resumed pull transferred %d bytes, want the %d not kept", rest, total-half)
	}
}

// signalAt is pull's stdout: it sends SIGINT to this process once a
// JSON line reports at bytes of digest.
type signalAt struct {
	at     int64
	digest string
	mu     sync.Mutex
	sent   bool
	err    error
	buf    []byte
}

func (s *signalAt) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.buf = append(s.buf, p...)
	sc := bufio.NewScanner(strings.NewReader(string(s.buf)))
	for sc.Scan() {
		var ev pull.Event
		if json.Unmarshal(sc.Bytes(), &ev) == nil && ev.Digest == s.digest && ev.Completed >= s.at && !s.sent {
			s.sent = true
			s.err = syscall.Kill(os.Getpid(), syscall.SIGINT)
		}
	}
	return len(p), nil
}

// An argument that is an existing file stays a file, even when it reads
// as a model name; one written as a path is never a name.
func TestModelArgument(t *testing.T) {
	t.Chdir(t.TempDir())
	e := newPullEnv(t)
	if err := os.WriteFile("llama3.2", e.gguf, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		arg  string
		file string
		name bool
		err  string
	}{
		{"llama3.2", "llama3.2", false, ""},
		{"./llama3.2", "./llama3.2", false, ""},
		{"llama3.1", "", true, ""},
		{"hf.co/u/r:Q8_0", "", true, ""},
		{"hf.co/u/r/file.gguf", "", true, ""},
		{"model.gguf", "", false, "no such file"},
		{"/abs/model", "", false, "no such file"},
		{"hf.co/u", "", false, "hf.co/u"},
		{"a b", "", false, "neither a file nor a model name"},
	} {
		ref, err := parseModelRef(c.arg)
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("%q: %v, want an error with %q", c.arg, err, c.err)
			}
			continue
		}
		if err != nil || ref.file != c.file || ref.isName != c.name {
			t.Errorf("%q: %+v %v; want file %q, name %v", c.arg, ref, err, c.file, c.name)
		}
	}
	if code, out, errOut := runCmd(t, "run", "llama3.2", "-p", "x", "-n", "2", "--offline"); code != 0 || out == "" {
		t.Errorf("run of a file named like a model: exit %d, %s", code, errOut)
	}
	if n := len(e.reg.Requests()); n != 0 {
		t.Errorf("a file argument reached the registry %d times", n)
	}
}
