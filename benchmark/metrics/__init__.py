"""Scores of embeddings: ``retrieval`` (Recall@K, NMI, MAP@R, R-Precision for class labels),
``continuous`` (nDCG, label distances for continuous labels) and ``stats`` (intervals over
seeds and test queries). Pure functions of arrays: no training, no files.
"""
