"""Data files of the mapping: keyword rules and the labelled calendar events."""
