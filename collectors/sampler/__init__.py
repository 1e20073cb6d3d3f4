"""Sampler mode: the LD_PRELOAD SIGPROF/perf-event sampler for unmodified programs."""
