// Package hf pulls GGUF models from the Hugging Face Hub by name and
// keeps them in the Hugging Face cache, where huggingface_hub (the `hf`
// CLI, transformers, llama.cpp's -hf) keeps them too: a file either
// downloaded is the other's without a byte more.
//
// Names are those Ollama and llama.cpp take (ParseName, IsName):
//
//	hf.co/{user}/{repo}[:{quant}][@{revision}]     the .gguf file whose name holds the tag (default Q4_K_M)
//	hf.co/{user}/{repo}/{file}.gguf[@{revision}]   that file
//
// huggingface.co/… and the Hub's own file addresses
// (https://huggingface.co/{user}/{repo}/blob/{rev}/{file}.gguf) work too.
// Choose says which file a tag picks and when it is ambiguous.
//
// A command layer needs four calls; Options{} takes everything from the
// environment (HF_ENDPOINT, HF_TOKEN, HF_HUB_CACHE, HF_HOME,
// HF_HUB_OFFLINE) and Options.Transfer.Progress takes pull.NewProgress:
//
//	ringlm pull NAME   path, err := hf.Pull(ctx, name, opts)
//	ringlm run NAME    path, err := hf.Resolve(name, opts)            // no network, no hashing
//	                   if errors.Is(err, hf.ErrNotCached) && !offline { path, err = hf.Pull(ctx, name, opts) }
//	ringlm list        models, err := hf.List(opts)
//	ringlm rm NAME     freed, err := hf.Remove(name, opts)
//
// The Hub protocol, as huggingface_hub speaks it: GET
// {endpoint}/api/models/{repo}[/revision/{rev}] lists the files
// (siblings[].rfilename) and the commit (sha); HEAD
// {endpoint}/{repo}/resolve/{commit}/{file}, following only relative
// redirects (a renamed repository), gives the file's sha256 in
// X-Linked-Etag and its size in X-Linked-Size on the answer that
// redirects to the CDN; a GET of the same address follows redirects to
// the CDN, which gets no Authorization header (pull.Fetch drops it off
// the first host). The token goes as a bearer token; a 401 or 403 says
// how to give one.
//
// The cache, huggingface_hub's layout (the file cache.go has the map):
// blobs/{sha256} holds the bytes, snapshots/{commit}/{file} is a relative
// symlink to it, refs/{revision} the commit. A download's partial data is
// kept in blobs/{sha256}.partial with its sidecar of completed ranges
// (.partial.json), not in huggingface_hub's blobs/{sha256}.incomplete:
// huggingface_hub resumes an .incomplete file from its length, and
// parallel parts leave holes before that length. An .incomplete that
// huggingface_hub left is a plain prefix, and Pull resumes from it. Both
// take the same lock, .locks/models--{user}--{repo}/{sha256}.lock.
//
// Offline (Resolve, or Options.Offline): refs/{revision} → the snapshot
// → the file Choose picks among the snapshot's .gguf files, so a name
// without a tag may pick a different file offline when the snapshot
// holds fewer than the repository.
//
// Not supported yet: split GGUFs (-00001-of-00003.gguf) are refused with
// ErrSplit, saying to merge them with llama-gguf-split; repositories of
// datasets and spaces; files not stored in LFS (they have no sha256 to
// verify them by; GGUF files are always in LFS).
package hf
