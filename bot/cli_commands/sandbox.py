"""`signoff sandbox`: the bot, a local Slack stand-in and a demo app, in one process."""

from __future__ import annotations

import argparse
from typing import Any

from bot import config
from bot.cli_commands.common import add, add_app_dir, call_main, use_app_dir

#: The module whose ``main(settings, app_ref, port, socket_mode=...)`` runs the sandbox.
RUNNER = "bot.sandbox.runner"


def sandbox(args: argparse.Namespace) -> int:
    # Through the settings, so --app and --database-url are validated like the variables.
    overrides = {k: v for k, v in (("app", args.app), ("database_url", args.database_url)) if v}
    use_app_dir(args.app_dir)
    settings = config.load_settings(**overrides)
    if args.socket_mode:
        return call_main("sandbox", RUNNER, settings, settings.app, args.port, True)
    return call_main("sandbox", RUNNER, settings, settings.app, args.port)


def add_parser(commands: Any) -> None:
    box = add(commands, "sandbox", "run a demo app against a local Slack stand-in",
              "Run the bot, a local Slack stand-in and a demo app together: no Slack "
              "workspace needed.")
    box.add_argument("--port", type=int, default=3000, help="HTTP port (default: 3000)")
    box.add_argument("--app", metavar="MODULE:ATTR",
                     help="app to run (default: SIGNOFF_APP, else examples.quotes:app)")
    box.add_argument("--database-url", metavar="URL",
                     help="database to use (default: DATABASE_URL, else ./signoff-sandbox.db)")
    box.add_argument("--socket-mode", action="store_true",
                     help="the bot takes the page's clicks and commands as Socket Mode "
                     "envelopes over a WebSocket, as with SLACK_APP_TOKEN, instead of "
                     "signed HTTP requests")
    add_app_dir(box)
    box.set_defaults(call=sandbox)
