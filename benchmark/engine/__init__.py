"""The training engine: one protocol, one method, one seed → a trained network.

``train`` (setup, epoch loop, step), ``checkpoint`` (resume after a kill), ``distributed``
(DDP under torchrun, tested with gloo) and ``preflight`` (one batch before a study). It knows
methods, models and data, and nothing of searches, leaderboards or the command line.
"""
