"""Stage 8: the runs folder.

Owns the SQLite ledger, the compile cache and its JSON codec, stored artifacts, safe file
writes inside ``runs/`` and ``loop doctor``. Imports no compiler and no device: it stores their
values, it never runs them.
"""
