"""``python -m nb_durable.cli``: the ``nb-durable`` command."""

import sys

from .commands import main

sys.exit(main())
