// Package hubtest provides what tests of code that talks to the Hugging Face Hub need without the Hub: a
// Server on loopback that answers as the Hub does, and WriteCache, which lays a model out in a cache as
// huggingface_hub's hf_hub_download does.
package hubtest
