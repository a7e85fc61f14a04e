"""Durable steps on an append-only log, with the standard library only.

Nothing here imports Jupyter or Anthropic: ``core`` is the layer everything else stands on
(see docs/design.md, "Layers"). The names users need are exported from ``nb_durable``.
"""
