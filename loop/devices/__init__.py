"""Devices: open an artifact, run frames on it, report health."""
