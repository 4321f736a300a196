"""`python -m bot` is the `signoff` command."""

from bot import cli

raise SystemExit(cli.main())
