package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// Each `ringlm serve` registers itself for as long as it runs: a small
// JSON file in the runtime directory, written atomically (a rename) once
// it listens and removed when it stops. `ringlm ps` (ps.go) reads them.

// runtimeDir is where serve registers: $RINGLM_RUNTIME_DIR, else
// $XDG_RUNTIME_DIR/ringlm (the user's, emptied at logout), else
// ringlm-$UID in $TMPDIR.
func runtimeDir() string {
	if d := os.Getenv("RINGLM_RUNTIME_DIR"); d != "" {
		return d
	}
	if d := os.Getenv("XDG_RUNTIME_DIR"); d != "" {
		return filepath.Join(d, "ringlm")
	}
	return filepath.Join(os.TempDir(), "ringlm-"+strconv.Itoa(os.Getuid()))
}

// registration is one serve process's file in the runtime directory.
type registration struct {
	PID     int       `json:"pid"`
	Address string    `json:"address"` // host:port it listens on
	Started time.Time `json:"started"`
}

// registered counts the servers this process registered: the first is
// {pid}.json, later ones (tests run several in one process) {pid}-{n}.json.
var registered atomic.Int64

// register writes this server's registration for addr, atomically (a
// rename), and returns the func that removes it.
func register(addr string) (func(), error) {
	dir := runtimeDir()
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("runtime directory: %w", err)
	}
	if err := checkPrivate(dir); err != nil {
		return nil, err
	}
	name := strconv.Itoa(os.Getpid())
	if n := registered.Add(1); n > 1 {
		name += "-" + strconv.FormatInt(n, 10)
	}
	path := filepath.Join(dir, name+".json")
	b, err := json.Marshal(registration{PID: os.Getpid(), Address: addr, Started: time.Now()})
	if err != nil {
		return nil, err
	}
	tmp, err := os.CreateTemp(dir, ".register-*")
	if err != nil {
		return nil, fmt.Errorf("runtime directory: %w", err)
	}
	_, err = tmp.Write(b)
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp.Name(), path)
	}
	if err != nil {
		os.Remove(tmp.Name())
		return nil, fmt.Errorf("registering in %s: %w", dir, err)
	}
	var once sync.Once
	return func() { once.Do(func() { os.Remove(path) }) }, nil
}

// checkPrivate refuses a runtime directory that another user owns or may
// write: ps sends the API key to the addresses it finds there.
func checkPrivate(dir string) error {
	fi, err := os.Lstat(dir)
	if err != nil {
		return fmt.Errorf("runtime directory: %w", err)
	}
	if !fi.IsDir() {
		return fmt.Errorf("runtime directory %s is not a directory", dir)
	}
	if uid, ok := fileOwner(fi); ok && uid != os.Getuid() {
		return fmt.Errorf("runtime directory %s belongs to uid %d, not to you (uid %d); set RINGLM_RUNTIME_DIR", dir, uid, os.Getuid())
	}
	if fi.Mode().Perm()&0o022 != 0 {
		return fmt.Errorf("runtime directory %s is writable by others (mode %v); chmod 700 it or set RINGLM_RUNTIME_DIR", dir, fi.Mode().Perm())
	}
	return nil
}
