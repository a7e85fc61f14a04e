"""Delegation: the agent hands a piece of work to a child run, a durable sub-agent of its own.

``tool`` is the ``delegate`` tool the model is offered (only when the run's ``delegate``
setting is on) and how a child's settings and tools follow from the parent's; ``spawn`` runs
a turn's delegate calls (each child's start a recorded step, the children in threads, their
outcomes back as tool results in ``tool_use`` order); ``outcome`` words what a child ended
with; ``stop`` links a child's stop signal to its parent's; ``tree`` reads a run's children
(their ids, their cost, their tree).
"""
