"""Spec files: load, expand, run, dump (Android test-generator .mod.py format)."""
