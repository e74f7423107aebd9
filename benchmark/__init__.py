"""dmlbench: deep metric learning methods re-run under frozen protocols.

The public entry points are the command line (``dmlbench --help``) and a few functions:

>>> from dmlbench.protocol import load_protocol
>>> from dmlbench.runner import run_protocol
"""

from __future__ import annotations

__version__ = "0.1.0"
