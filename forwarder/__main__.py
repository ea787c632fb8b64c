"""`python -m forwarder`: run one forwarder daemon (normally started by mmpi-run)."""

from .cli import main

raise SystemExit(main())
