"""loop: an on-device evaluation loop for compile-and-score experiments."""
__version__ = "0.1.0"
