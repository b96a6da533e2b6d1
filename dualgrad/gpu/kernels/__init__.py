"""Launch code of the gpu kernels, one module per family, each named like its cpu twin
(``dualgrad/cpu/<family>.py``) and its shaders: the recipe of each dispatch (specialization,
push constants, grid) and the call of ``Device.launch``."""
