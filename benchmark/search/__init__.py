"""Equal-budget hyper-parameter search on validation classes (Optuna).

``study`` runs a method's study and selects its trial, ``worker`` runs trials (in this process
or in spawned workers), ``storage`` opens SQLite/PostgreSQL storages, ``validation`` carves
class-disjoint folds out of the training classes. The public entry points are re-exported here.
"""

from __future__ import annotations

from dmlbench.search.study import SearchError, tune

__all__ = ["SearchError", "tune"]
