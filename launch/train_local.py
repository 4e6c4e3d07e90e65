"""Train with the local launcher: every role a subprocess (`python -m actorq.roles NAME`), restarted when it crashes.

``python launch/train_local.py CONFIG [section.key=value ...] [actorq train flags]`` is
``actorq train CONFIG ... --launcher local``; the launcher itself is :mod:`actorq.launchers`.
"""

import sys

from actorq.cli import main

if __name__ == "__main__":
    sys.exit(main(["train", *sys.argv[1:], "--launcher", "local"]))
