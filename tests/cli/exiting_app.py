"""A script, not a module: importing it calls ``sys.exit`` (``--app`` must say so)."""

import sys

sys.exit(3)
