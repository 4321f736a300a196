"""`signoff serve`: the bot, over HTTP or Socket Mode, with its scheduled jobs."""

from __future__ import annotations

import argparse
import textwrap
from typing import Any

from bot import config
from bot.cli_commands.common import add, add_app_dir, call_main, use_app_dir

ABOUT = (
    "Run the bot: Slack events, interactivity and commands on POST /slack/events, or over "
    "Socket Mode when SLACK_APP_TOKEN is set; GET /healthz, /readyz and /metrics (Prometheus; "
    "loopback only unless SIGNOFF_METRICS_TOKEN is set); plus the expiry, reaper, outbox and "
    "purge jobs (one reaper pass at start; the purge runs daily by default). Options override "
    "the environment."
)


def serve(args: argparse.Namespace) -> int:
    overrides = {k: v for k, v in (("port", args.port), ("host", args.host)) if v is not None}
    use_app_dir(args.app_dir)
    return call_main("serve", "bot.server", config.load_settings(**overrides))


def add_parser(commands: Any) -> None:
    cmd = add(
        commands, "serve", "run the bot over HTTP or Socket Mode, with its scheduled jobs",
        textwrap.fill(ABOUT, 100)
        + "\n\nSettings, read from the environment:\n\n" + config.settings_help(),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    cmd.add_argument("--port", type=int, help="listen on this port (default: PORT, 3000)")
    cmd.add_argument("--host", help="listen on this interface (default: SIGNOFF_HOST)")
    add_app_dir(cmd)
    cmd.set_defaults(call=serve)
