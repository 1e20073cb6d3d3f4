"""Modal screens: help, notes, export, quit."""
