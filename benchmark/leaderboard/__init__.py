"""The committed leaderboard: ``check`` re-runs its entries and compares within tolerances,
``update`` regenerates it, ``tasks`` runs entries side by side with one torch thread each.
"""
