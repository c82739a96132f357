"""Spec files and the random-graph generator: valid models from any source of choices."""
