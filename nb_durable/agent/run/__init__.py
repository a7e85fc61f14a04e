"""A run: the loop, its session, the seams where it meets the world, and its points.

``loop`` starts, resumes and continues runs; ``session`` is one session's turn loop;
``seams`` are the model call and the tool call, each through ``run_step``; ``points`` are
where a run may change course (a settings change, a follow-up), each a recorded step;
``changes`` says what a resume asks to change; ``request`` builds what a model call sends;
``outcomes`` says how a run ended; ``hooks`` are what a caller hands in (deciders,
observers, prices, a stop signal from ``stopping``, a crash switch from ``crash``).
"""
