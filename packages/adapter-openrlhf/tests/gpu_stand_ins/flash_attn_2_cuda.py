"""Stand-in for flash-attn's compiled CUDA extension: importable, never called on CPU (eager attention)."""
