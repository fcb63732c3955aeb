// Package hub names models as Hugging Face users do, by Hub repository id ("bert-base-uncased",
// "Qwen/Qwen2.5-0.5B"), and keeps them in Hugging Face's own cache, so that a model fetched by transformers,
// huggingface-cli or any other HF tool is reused by tune and a model fetched by tune is reused by them.
//
// The cache layout is the one huggingface_hub writes (documented at
// https://huggingface.co/docs/huggingface_hub/guides/manage-cache, implemented in huggingface_hub's
// file_download.py):
//
//	$HF_HUB_CACHE (else $HF_HOME/hub, else $XDG_CACHE_HOME/huggingface/hub, else ~/.cache/huggingface/hub)
//	└── models--org--name/
//	    ├── blobs/<etag>                          the file contents, named by the Hub's etag
//	    ├── refs/<revision>                       the commit a branch or tag pointed at when last fetched
//	    └── snapshots/<commit>/<path> -> ../../blobs/<etag>
//
// and .locks/models--org--name/<etag>.lock beside the repository folders, taken with flock as
// huggingface_hub's filelock does, so that tune and an HF tool never write one blob at the same time.
//
// The simplest use resolves what a user typed to a directory:
//
//	dir, err := hub.Resolve("bert-base-uncased", "") // a local path stays itself; an id becomes its snapshot
//
// A value that exists on disk is a local path; anything else that is a valid repository id is looked up in
// the cache at the revision ("" is "main"). A repository or revision missing from the cache is a
// *NotCachedError, which names the cache folder and the command that fills it (tune download).
//
// Download fetches a repository over the Hub's HTTP API (GET /api/models/{id}/revision/{rev} for the file list
// and commit, HEAD and GET /{id}/resolve/{commit}/{file} for each file), as huggingface_hub's snapshot_download
// does:
//
//	c := hub.NewClient() // HF_ENDPOINT, HF_TOKEN, HF_HUB_OFFLINE and the cache from the environment
//	res, err := c.Download(ctx, "bert-base-uncased", hub.Options{Revision: "main"})
//
// Files are written as blobs/<etag>.incomplete and resumed with an HTTP Range request after an interruption
// (in the same call, and in a later one); each finished blob is verified against its etag (the SHA-256 of an
// LFS file, the git blob SHA-1 of a small file) before it is renamed into place. safetensors are preferred:
// pickle files (.bin, .pt, .pth, .ckpt, .pkl) are never fetched unless Options.AllowPickle is set, and other
// frameworks' weights (TensorFlow, Flax, ONNX, ...) only when Options.Include names them. Offline
// (HF_HUB_OFFLINE=1) or without network, Download answers from the cache, and an error names what the cache
// lacks.
package hub
