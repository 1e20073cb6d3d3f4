"""Heap mode: the LD_PRELOAD heap profiler (allocations, live bytes, peak and leaks)."""
