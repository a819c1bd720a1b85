package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

// ps lists the models of every live registered server, one of them
// behind an API key; a registration whose process is gone is dropped
// and removed; one whose process lives but does not answer is reported
// and kept.
func TestPs(t *testing.T) {
	rt := t.TempDir()
	t.Setenv("RINGLM_RUNTIME_DIR", rt)
	t.Setenv("RINGLM_API_KEY", "")
	if code, out, errOut := runCmd(t, "ps"); code != 0 || out != "NAME   ID   SIZE   PROCESSOR   CONTEXT   ADDRESS   SINCE\n" || errOut != "" {
		t.Fatalf("no servers: %d %q %q", code, out, errOut)
	}

	a := synthModel(t, t.TempDir(), "a", "llama")
	baseA, _ := startServe(t, "-m", a, "--port", "0", "--log-format", "json", "--kv-blocks", "64")
	baseB, _ := startServe(t, "--port", "0", "--log-format", "json", "--kv-blocks", "64", "--api-key", "k")
	addrA, addrB := strings.TrimPrefix(baseA, "http://"), strings.TrimPrefix(baseB, "http://")

	dead := exec.Command("true")
	if err := dead.Run(); err != nil {
		t.Skip("no true(1) to make a dead pid:", err)
	}
	stale := filepath.Join(rt, strconv.Itoa(dead.Process.Pid)+".json")
	silent := filepath.Join(rt, strconv.Itoa(os.Getpid())+"-99.json")
	for path, pid := range map[string]int{stale: dead.Process.Pid, silent: os.Getpid()} {
		b, _ := json.Marshal(registration{PID: pid, Address: "127.0.0.1:1", Started: time.Now()})
		if err := os.WriteFile(path, b, 0o600); err != nil {
			t.Fatal(err)
		}
	}

	// Without the key: a's model, and one line on b.
	code, out, errOut := runCmd(t, "ps")
	if code != 0 || strings.Count(out, "\n") != 2 || !strings.Contains(errOut, addrB+" (pid "+strconv.Itoa(os.Getpid())+") wants its API key") {
		t.Fatalf("without the key: %d\n%s\n%s", code, out, errOut)
	}
	if _, err := os.Stat(stale); !os.IsNotExist(err) {
		t.Errorf("the dead server's registration is still there: %v", err)
	}
	if _, err := os.Stat(silent); err != nil || !strings.Contains(errOut, "127.0.0.1:1 (pid "+strconv.Itoa(os.Getpid())+") does not answer") ||
		!strings.Contains(errOut, "remove "+silent) {
		t.Errorf("a live pid that does not answer must be reported and kept: %v\n%s", err, errOut)
	}

	t.Setenv("RINGLM_API_KEY", "k") // a has none: the header does not hurt
	code, out, _ = runCmd(t, "ps")
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	if code != 0 || len(lines) != 3 || !strings.HasPrefix(lines[0], "NAME") {
		t.Fatalf("with the key: %d\n%s", code, out)
	}
	// One model per server, named as /v1/models names it (general.name
	// for a single -m), with its 12-digit id, device, context, address
	// and when it was loaded.
	row := regexp.MustCompile(`^(.+?)\s{3,}([0-9a-f]{12})\s+[0-9.]+ [KMG]iB\s+cpu\s+(\d+)\s+(\S+)\s+(just now|\d+ seconds? ago)$`)
	want := map[string]string{addrA: "2048", addrB: "512"}
	for _, l := range lines[1:] {
		m := row.FindStringSubmatch(l)
		if m == nil || want[m[4]] != m[3] {
			t.Errorf("line %q is not a model of a test server", l)
			continue
		}
		delete(want, m[4])
	}
	if len(want) != 0 {
		t.Errorf("servers missing from ps: %v\n%s", want, out)
	}

	code, out, _ = runCmd(t, "ps", "--json")
	var js struct {
		Models []struct {
			Name, Address, Device string
			PID                   int
			Size                  int64
			Details               struct{ Format, Family string }
			LoadedAt              time.Time `json:"loaded_at"`
		}
	}
	if err := json.Unmarshal([]byte(out), &js); err != nil || code != 0 || len(js.Models) != 2 {
		t.Fatalf("ps --json: %d %v\n%s", code, err, out)
	}
	for _, m := range js.Models {
		if m.PID != os.Getpid() || m.Size <= 0 || m.Details.Format != "gguf" || m.Details.Family != "llama" ||
			time.Since(m.LoadedAt) > time.Minute || (m.Address != addrA && m.Address != addrB) {
			t.Errorf("ps --json model: %+v", m)
		}
	}
	if code, _, errOut := runCmd(t, "ps", "extra"); code != 2 || !strings.Contains(errOut, "unexpected argument") {
		t.Errorf("ps extra: %d %q", code, errOut)
	}
}

// A runtime directory that others may write is refused: ps would send
// the API key to the addresses found there.
func TestPsPrivateDir(t *testing.T) {
	rt := filepath.Join(t.TempDir(), "rt")
	if err := os.Mkdir(rt, 0o777); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(rt, 0o777); err != nil { // past the umask
		t.Fatal(err)
	}
	t.Setenv("RINGLM_RUNTIME_DIR", rt)
	if code, _, errOut := runCmd(t, "ps"); code != 1 || !strings.Contains(errOut, "writable by others") || strings.Count(errOut, "\n") != 1 {
		t.Errorf("ps in a shared directory: %d %q", code, errOut)
	}
	if _, err := register("127.0.0.1:1"); err == nil || !strings.Contains(err.Error(), "writable by others") {
		t.Errorf("register in a shared directory: %v", err)
	}
}

func TestHumanSince(t *testing.T) {
	for _, c := range []struct {
		d    time.Duration
		want string
	}{
		{0, "just now"}, {time.Second, "1 second ago"}, {45 * time.Second, "45 seconds ago"}, {5 * time.Minute, "5 minutes ago"},
		{time.Hour + time.Minute, "1 hour ago"}, {47 * time.Hour, "47 hours ago"}, {72 * time.Hour, "3 days ago"},
	} {
		if got := humanSince(c.d); got != c.want {
			t.Errorf("humanSince(%v) = %q, want %q", c.d, got, c.want)
		}
	}
}
