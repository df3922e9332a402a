"""A module whose import raises ``KeyboardInterrupt`` (an ``input()`` at import, say)."""

raise KeyboardInterrupt
