"""The stack-table data path (DESIGN.md section 7): stacks aggregated where samples are
made, each distinct stack symbolized and inserted once, counts applied as differences.
Shared by the sampler, attach and heap collectors."""
