"""How a run's lines reach its store: the one write path (``writer``), and Ctrl-C held while
a line is stored and counted (``interrupts``)."""
