"""Where `pip install` builds the C runtime libraries and helpers (never imported)."""
