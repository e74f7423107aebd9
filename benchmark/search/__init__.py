"""Equal-budget hyper-parameter search on validation classes (Optuna).

``tuning`` runs a method's study to its budget, ``study`` opens it, counts its trials and
selects one, ``worker`` runs trials (in this process or in workers that ``processes``
spawns), ``storage`` opens SQLite/PostgreSQL storages, ``validation`` carves class-disjoint
folds out of the training classes. The public entry points are re-exported here.
"""

from __future__ import annotations

from dmlbench.search.storage import SearchError
from dmlbench.search.tuning import tune

__all__ = ["SearchError", "tune"]
