"""Shipped protocols (one YAML each) and ``protocols.lock``; see ``dmlbench list protocols``."""
