"""The panes: one widget per view of the profile, each in its own module."""
