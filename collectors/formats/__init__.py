"""Profile file formats: exporters to other tools and importers of their files."""
