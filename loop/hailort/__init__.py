"""The binding to loop's C shim over HailoRT, shared by the Hailo compiler (reading a
HEF's layouts) and the HailoRT device. Loads a library only when called.
"""
