// Package pull downloads models by name: from the Hugging Face Hub
// (pull/hf) and from Ollama registries (pull/ollama), into the caches
// those tools use. This package is the transfer engine both share, and
// the progress display of `ringlm pull`.
//
// Fetch brings one content-addressed blob to a final path:
//
//   - a blob of Options.SplitAt bytes or more (64 MiB) is fetched in
//     Options.Parts ranged parts at once (8), each on a connection of its
//     own; a server that ignores Range gets one request for the whole;
//   - the data lives in {dest}.partial until verified, with a sidecar
//     {dest}.partial.json listing the byte ranges it holds, written only
//     after those bytes were: an interrupted Fetch, a cancelled context or
//     a killed process, resumes and transfers only the rest. A partial file
//     without a sidecar is a plain prefix (what huggingface_hub leaves);
//   - a part that gets no byte for Options.StallTimeout, or loses its
//     connection, is asked again from where it stopped, after a doubling
//     wait (Options.Backoff), until Options.Attempts tries in a row brought
//     nothing; 4xx answers are final (ErrNotFound, ErrUnauthorized);
//   - free disk space is checked first (ErrNoSpace, saying how much is
//     needed and free);
//   - the sha256 is verified before the file takes its final name; a
//     mismatch discards the data and names both digests (ErrDigestMismatch);
//   - two Fetches of one blob, in one process or two, take turns on an
//     flock, and the second finds the file done.
//
// A file already under its final name is taken as the blob without being
// read again: hashing happens only when downloading.
//
// NewProgress shows Fetch's events: a bar with speed and ETA on a
// terminal, JSON lines otherwise, as `ollama pull` prints them.
//
// pull/pulltest has the loopback servers the tests of this package and
// of the registry clients use: a blob server whose misbehaviours a test
// switches on, and a fake Hub.
package pull
