"""Chrome Trace Event JSON, including Kineto (PyTorch profiler) traces: reader and writer."""
