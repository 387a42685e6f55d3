"""Foundations shared by every layer: multiple testing, parallel map, the numba check. Imports nothing of heroeval but errors."""
