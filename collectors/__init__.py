"""Collectors: run or attach to a target and produce `proftui.collectors.model.profile.Profile`s.

Nothing in this package imports Textual (docs/architecture.md section 1).
"""
