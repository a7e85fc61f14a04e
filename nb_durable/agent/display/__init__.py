"""What people see of runs: views, progress lines, exports, inert Markdown, and traces.

``views`` builds a step's and a run's view from the record (the one builder of each);
``progress`` writes them as terminal lines and owns how costs and step ids read as words;
``export`` writes a run as a notebook, ``markdown`` makes a model's text inert, ``tracing``
turns runs and steps into OpenTelemetry spans. Display never changes what is recorded.
"""
