"""serving/: open-weights export, the fast variant (quantized target + speculative draft) and the OpenAI-compatible
vLLM server. A regular package so that pytest names serving/tests `serving.tests`, not a top-level `tests`
(which would shadow the repository's own tests/ package of cross-stage tools)."""
