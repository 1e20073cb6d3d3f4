"""Instrument mode: -finstrument-functions programs, proftui's hook library."""
