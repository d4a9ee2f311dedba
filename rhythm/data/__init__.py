"""Data shipped with the app: the bundled sample (sample/) and the script that makes it."""
