"""Many runs at once: background runs, their questions, workers, batches and shared limits.

``background_runs`` runs an agent off the caller's thread behind a handle (stop, wait,
pending questions); ``decisions`` are the questions a waiting run asks and who answered;
``worker`` resumes runs whose writer died and starts queued ones; ``batch`` queues runs for
workers and gathers their results; ``shared_limits`` are the call slots, token window and
pauses per endpoint that every process using a store shares.
"""
