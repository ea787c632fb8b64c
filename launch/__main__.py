"""Let ``python -m launch`` stand in for ``mmpi-run``."""

from __future__ import annotations

from .cli import main

if __name__ == "__main__":
    raise SystemExit(main())
