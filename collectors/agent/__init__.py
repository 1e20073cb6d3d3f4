"""Agent mode: every process of the host, each pushed as its own series."""
