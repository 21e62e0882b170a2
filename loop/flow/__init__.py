"""The sweep as a whole: order, parallel compiles, runners, resume.

Owns ``sweep`` (the reference first, then every variant through its stages), the compile pool
and its child processes (loky or Dask, one windowed loop), the runners (``runner``: the
interface; ``local_runner`` and ``device_child``: each device in a child process of its own;
``remote``: the same on Dask workers holding devices), ``measuring`` (each variant run as it is
compiled), ``evaluate`` (audit and score what a runner returned), resume and claims; and
``supervise``, the one module that starts a child process (``keeper``: beside a device child).
Also ``fit``: a model file weighed against a device (``loop fit``). The only role that puts the
others together; the face calls it.
"""
