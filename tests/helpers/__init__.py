"""Helpers the tests share (writers that mirror the C runtimes, reference tools)."""
