"""``python -m nb_durable``: the ``nb-durable`` command, for environments whose scripts folder
is not on PATH (a notebook kernel's ``!{sys.executable} -m nb_durable ...``)."""

import sys

from .cli import main

sys.exit(main())
