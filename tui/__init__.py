"""proftui's front end: the command line and the Textual app."""
