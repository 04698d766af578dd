/* Stand-in: see cuda_runtime.h. */
