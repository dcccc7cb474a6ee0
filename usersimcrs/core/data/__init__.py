"""Data files shipped with the package: the human reference statistics (human_reference.json)."""
