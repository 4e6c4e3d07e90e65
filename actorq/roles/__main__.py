"""``python -m actorq.roles NAME ...``: run one role process (what the launchers spawn); see :mod:`actorq.roles.cli`."""

import sys

from actorq.roles.cli import main

sys.exit(main())
