"""The binding to loop's C shim over HailoRT, shared by the Hailo compiler (reading a
HEF's layouts) and the HailoRT device, and a reader of HEF files that needs neither the shim
nor any Hailo software (:mod:`loop.hailort.hef`, ``loop inspect``). Loads a library only when called.
"""
