"""``python -m dmlbench`` is the same as the ``dmlbench`` console script."""

from __future__ import annotations

from dmlbench.cli.main import main

raise SystemExit(main())
