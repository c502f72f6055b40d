"""`python -m tubeless`: the tubeless command line."""

from tubeless.cli import main

raise SystemExit(main())
