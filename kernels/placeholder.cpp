// placeholder until the kernels module lands
