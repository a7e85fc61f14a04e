"""What is done to a run as a whole, beside appending to it: fork it at a step (``fork``),
copy it to another store (``transfer``), delete or prune it (``retention``), and start child
runs under it (``children``). Each works through the stores' one Protocol and the runs'
leases, as every writer does."""
