"""``python -m signoff_client.worker module:attr``: the same as ``signoff-worker``."""

from signoff_client.worker.cli import main

raise SystemExit(main())
