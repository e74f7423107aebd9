"""Micro-benchmarks of dmlbench's own machinery (``python -m dmlbench.perf.data``)."""
