"""gprof mode: programs built with -pg; gmon.out parsed natively, gprof's arithmetic."""
