"""Collectors: run or attach to a target and produce `proftui.collectors.model.profile.Profile`s.

Nothing in this package imports Textual (DESIGN.md section 1).
"""
