"""The run index: ``rows`` (the summary per run, derived from its log, and the check that it
still is) and ``claim`` (a worker's next runs, and the notifications that wake it)."""
