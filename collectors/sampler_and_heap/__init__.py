"""--heap: the sampler and the heap profiler preloaded into one run (mode "sampler+heap")."""
