"""Attach mode: sample a running process with the proftui-attach helper."""
