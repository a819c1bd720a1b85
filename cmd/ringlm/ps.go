package main

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"text/tabwriter"
	"time"

	"ringlm/httpapi"
)

// `ringlm ps` lists the models loaded by the `ringlm serve` processes of
// this user on this machine, as `ollama ps` lists Ollama's. Each serve
// registers itself as a small JSON file in the runtime directory
// (registration) for as long as it runs; ps reads them and asks each
// server's GET /api/ps.

// psTimeout bounds each server's answer: a loaded server answers /api/ps
// without touching its device.
const psTimeout = 3 * time.Second

// psServer is a registered server and what it answered.
type psServer struct {
	file string
	reg  registration
	ans  httpapi.RunningModels
	err  error
}

// psModel is one line of ps: a model and the server it is loaded in.
type psModel struct {
	httpapi.RunningModel
	Address string `json:"address"`
	PID     int    `json:"pid"`
}

func runPs(args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("ps", "ps [--json]\n\nLists the models loaded by the 'ringlm serve' processes of this user on this machine,\n"+
		"found in $RINGLM_RUNTIME_DIR, else $XDG_RUNTIME_DIR/ringlm, else $TMPDIR/ringlm-$UID.")
	asJSON := fs.Bool("json", false, "print JSON: GET /api/ps's models (Ollama's shape) with each one's server address and pid")
	// The key of servers started with --api-key, from the same variable.
	cfg := httpapi.DefaultConfig()
	for _, s := range cfg.Settings() {
		if s.Flag == "api-key" {
			if v := os.Getenv(s.Env); v != "" {
				_ = s.Value.Set(v) // a string: never refused
			}
			fs.Var(s.Value, s.Flag, "send 'Authorization: Bearer `KEY`' to the servers, for those started with --api-key ($"+s.Env+")")
		}
	}
	pos, err := parseFlags(fs, args)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return usagef("unexpected argument %q", pos[0])
	}
	servers, err := findServers(runtimeDir())
	if err != nil {
		return err
	}
	var wg sync.WaitGroup
	client := &http.Client{Timeout: psTimeout}
	for _, sv := range servers {
		wg.Go(func() { sv.ans, sv.err = askServer(client, sv.reg.Address, cfg.APIKey) })
	}
	wg.Wait()
	var out []psModel
	for _, sv := range servers {
		if sv.err != nil {
			msg := sv.err.Error()
			if errors.Is(sv.err, errNoAnswer) {
				// A live pid that is not this server any more (reused
				// after a crash) leaves the file; the user may remove it.
				msg += "; if that server is gone, remove " + sv.file
			}
			fmt.Fprintf(stderr, "ringlm ps: the server at %s (pid %d) %s\n", sv.reg.Address, sv.reg.PID, oneLine(msg))
			continue
		}
		for _, m := range sv.ans.Models {
			out = append(out, psModel{RunningModel: m, Address: sv.reg.Address, PID: sv.reg.PID})
		}
	}
	slices.SortStableFunc(out, func(a, b psModel) int {
		return cmp.Or(cmp.Compare(a.Address, b.Address), cmp.Compare(a.Name, b.Name))
	})
	if *asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(struct {
			Models []psModel `json:"models"`
		}{append([]psModel{}, out...)})
	}
	printPs(stdout, out, time.Now())
	return nil
}

// findServers reads the registrations in dir. One whose process is gone
// (a serve killed before it could remove it) is deleted; one that does not
// parse is skipped.
func findServers(dir string) ([]*psServer, error) {
	entries, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil // no server has run
	}
	if err != nil {
		return nil, fmt.Errorf("runtime directory: %w", err)
	}
	if err := checkPrivate(dir); err != nil {
		return nil, err
	}
	var out []*psServer
	for _, e := range entries {
		if e.IsDir() || !strings.HasSuffix(e.Name(), ".json") {
			continue
		}
		path := filepath.Join(dir, e.Name())
		b, err := os.ReadFile(path)
		if err != nil {
			continue // removed meanwhile
		}
		var reg registration
		if json.Unmarshal(b, &reg) != nil || reg.PID <= 0 || reg.Address == "" {
			continue
		}
		if !pidAlive(reg.PID) {
			os.Remove(path)
			continue
		}
		out = append(out, &psServer{file: path, reg: reg})
	}
	return out, nil
}

// pidAlive reports whether a process has the id pid. Signal 0 checks
// without sending anything; a process of another user (EPERM) is alive.
func pidAlive(pid int) bool {
	p, err := os.FindProcess(pid)
	if err != nil {
		return false
	}
	err = p.Signal(syscall.Signal(0))
	return err == nil || !errors.Is(err, os.ErrProcessDone)
}

var errNoAnswer = errors.New("does not answer")

// askServer asks the server at addr for its loaded models.
func askServer(client *http.Client, addr, key string) (httpapi.RunningModels, error) {
	var rm httpapi.RunningModels
	req, err := http.NewRequest("GET", "http://"+dialAddress(addr)+"/api/ps", nil)
	if err != nil {
		return rm, err
	}
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	resp, err := client.Do(req)
	if err != nil {
		return rm, fmt.Errorf("%w: %w", errNoAnswer, err)
	}
	defer resp.Body.Close()
	switch {
	case resp.StatusCode == http.StatusUnauthorized:
		return rm, errors.New("wants its API key: set RINGLM_API_KEY or pass --api-key")
	case resp.StatusCode != http.StatusOK:
		return rm, fmt.Errorf("answered GET /api/ps with %s", resp.Status)
	}
	if err := json.NewDecoder(io.LimitReader(resp.Body, 1<<20)).Decode(&rm); err != nil {
		return rm, fmt.Errorf("answered GET /api/ps with something else than its JSON: %w", err)
	}
	return rm, nil
}

// dialAddress is where to reach a server listening on addr: one bound to
// every interface (0.0.0.0, ::) is reached on loopback.
func dialAddress(addr string) string {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return addr
	}
	if ip := net.ParseIP(host); ip != nil && ip.IsUnspecified() {
		if ip.To4() != nil {
			host = "127.0.0.1"
		} else {
			host = "::1"
		}
	}
	return net.JoinHostPort(host, port)
}

// printPs writes ps's table, in `ollama ps`'s manner: a header, even when
// nothing is loaded, and one line per model.
func printPs(w io.Writer, models []psModel, now time.Time) {
	tw := tabwriter.NewWriter(w, 0, 0, 3, ' ', 0)
	fmt.Fprintln(tw, "NAME\tID\tSIZE\tPROCESSOR\tCONTEXT\tADDRESS\tSINCE")
	for _, m := range models {
		id := m.Digest
		if len(id) > 12 {
			id = id[:12]
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t%s\t%s\n", m.Name, id, humanBytes(uint64(max(m.Size, 0))), m.Device, m.ContextLength,
			m.Address, humanSince(now.Sub(m.LoadedAt)))
	}
	tw.Flush()
}

// humanSince says how long ago something happened, as ollama ps says it.
func humanSince(d time.Duration) string {
	switch {
	case d < time.Second:
		return "just now"
	case d < time.Minute:
		return plural(int(d/time.Second), "second") + " ago"
	case d < time.Hour:
		return plural(int(d/time.Minute), "minute") + " ago"
	case d < 48*time.Hour:
		return plural(int(d/time.Hour), "hour") + " ago"
	}
	return plural(int(d/(24*time.Hour)), "day") + " ago"
}

func plural(n int, unit string) string {
	if n == 1 {
		return "1 " + unit
	}
	return strconv.Itoa(n) + " " + unit + "s"
}
