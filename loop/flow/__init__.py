"""The sweep as a whole: order, parallel compiles, resume.

Owns ``sweep`` (the reference first, then every variant through its stages), the compile pool
and its child processes (loky or Dask, one windowed loop), resume and claims, and ``evaluate``
(one variant: compile result, fingerprint, audit, device run, score, record). The only role that
puts the others together; the face calls it.
"""
