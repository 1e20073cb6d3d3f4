"""Collectors: run or attach to a target and produce `collectors.model.Profile`s.

Nothing in this package imports Textual (DESIGN.md section 1).
"""
