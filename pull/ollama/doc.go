// Package ollama pulls models from Ollama registries (registry.ollama.ai,
// or any registry speaking its dialect of the Docker registry API v2) into
// a store laid out as Ollama lays out ~/.ollama/models, and reads such a
// store: what `ringlm pull`, `list`, `rm`, `show` and `run` need for a
// name like llama3.2, library/qwen2.5:0.5b or example.com/ns/model:tag.
//
// # Names
//
// ParseName reads {model}[:{tag}], {namespace}/{model}[:{tag}] and
// {host}/{namespace}/{model}[:{tag}], with Ollama's defaults
// (registry.ollama.ai, library, latest) and Ollama's rules for each part.
// Name.String is the full form, Name.DisplayShort the form `ollama list`
// prints. The rules admit no path separator and no "." or ".." part, so a
// name cannot reach outside the store; digests are checked to be
// sha256:<64 hex> before they name a file.
//
// # Protocol
//
// Pull GETs /v2/{namespace}/{model}/manifests/{tag} (Accept: the Docker
// manifest v2 media type), decodes the manifest (DecodeManifest: schema 2,
// sha256 digests, a model layer), then GETs /v2/{namespace}/{model}/
// blobs/{digest} for each blob the store lacks through pull.Fetch, which
// follows the registry's redirect to its CDN, resumes and verifies the
// sha256. Layers by media type: application/vnd.ollama.image.model is the
// GGUF file; .template, .system, .params and .license are small texts;
// the config blob (application/vnd.docker.container.image.v1+json) is
// fetched and kept as Ollama keeps it. Options.Registry replaces the
// name's host with a base URL (a mirror, a test server); Options.Insecure
// allows plain HTTP, as `ollama pull --insecure`. A 404 is one line
// naming the model and wraps pull.ErrNotFound; 401 and 403 wrap
// ErrUnauthorized (Ollama's signed-key login for private models is not
// implemented).
//
// # Store
//
// The store is a directory, $RINGLM_MODELS or ~/.ringlm/models
// (DefaultStore): manifests/{host}/{namespace}/{model}/{tag} holds each
// manifest as the registry served it and blobs/sha256-{hex} the blobs, as
// in Ollama's models directory, so RINGLM_MODELS=~/.ollama/models runs
// the models an Ollama installation has pulled. A manifest is written
// (temporary file, then rename) only after every blob it names is in
// place and verified, so a name in the store always names a whole model.
// Open, Resolve and List only read: a read-only Ollama store works.
// Remove deletes a manifest, the directories it leaves empty and the
// blobs no other manifest uses.
//
// # Templates and parameters
//
// An Ollama model's chat template is Go text/template source, not Jinja.
// ParseTemplate and Template.Render render a conversation as Ollama's
// chat endpoint does (the model's system prompt first unless the
// conversation has its own, consecutive turns of one role joined, a
// template without .Messages executed turn by turn with .Prompt and
// .Response). Model.ChatTemplate is the model's template as a
// chat.Template, which ringlm's run and HTTP API render like any other.
// Model.SampleParams turns the params layer into sample.Params defaults
// and Model.NumCtx reads num_ctx.
//
// The package parses no GGUF: Model.GGUFPath is for package gguf and the
// runner, and a quantization to show is read from there.
package ollama
