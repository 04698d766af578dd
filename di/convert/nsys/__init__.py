"""Nsight Systems connector: ``nsys export --type sqlite`` reports (and ``.nsys-rep`` through ``nsys``)."""
