"""The models and kernels under study: the GeGLU MLP, Liger through `kernels`, our epilogue-fused MLP and its Triton kernels, CUDA graphs."""
