"""The stack-table data path (docs/architecture.md section 4): stacks aggregated where samples are
made, each distinct stack symbolized and inserted once, counts applied as differences.
Shared by the sampler, attach and heap collectors."""
