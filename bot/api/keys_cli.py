"""`signoff api-keys create NAME [--tools GLOB ...] [--webhook URL] | list | revoke NAME`.

The key (and a webhook's signing secret) is printed once, at creation; only
the key's SHA-256 is stored, so a lost key is revoked and replaced, never
shown again.
"""

from __future__ import annotations

import argparse
import base64
import json
import re
import secrets
import sys
import urllib.parse
from datetime import UTC, datetime
from typing import Any

from bot import config
from bot.api import auth
from store import api_keys, engine, migrate
from store.api_records import ApiKey

_NAME = re.compile(r"^[A-Za-z0-9_.-]{1,100}$")


def add_parser(commands: Any) -> None:
    """Add ``api-keys`` and its three commands to the ``signoff`` parser."""
    keys = commands.add_parser("api-keys", help="manage the HTTP API's keys",
                               description="Manage the keys of the HTTP API under /api/v1/.")
    sub = keys.add_subparsers(dest="keys_command", metavar="COMMAND", required=True)
    create = sub.add_parser("create", help="create a key and print it once",
                            description="Create a key and print it (and its webhook secret) "
                                        "once: only a hash is stored.")
    create.add_argument("name", metavar="NAME", type=_name, help="a name for the key")
    create.add_argument("--tools", nargs="+", metavar="GLOB", default=["*"],
                        help="tools the key may ask for, as globs (default: every tool)")
    create.add_argument("--webhook", metavar="URL", type=_url,
                        help="POST call.decided, call.expired, call.unknown and run.finished "
                             "here, signed per Standard Webhooks")
    create.set_defaults(run=create_key)
    listing = sub.add_parser("list", help="list keys (never the keys themselves)")
    listing.add_argument("--json", action="store_true", help="print JSON instead of a table")
    listing.set_defaults(run=list_keys)
    revoke = sub.add_parser("revoke", help="revoke a key: it gets 401 from now on")
    revoke.add_argument("name", metavar="NAME", help="the key's name")
    revoke.set_defaults(run=revoke_key)


def _name(value: str) -> str:
    if not _NAME.match(value):
        raise argparse.ArgumentTypeError("use 1-100 letters, digits, '_', '.' or '-'")
    return value


def _url(value: str) -> str:
    parts = urllib.parse.urlsplit(value)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise argparse.ArgumentTypeError("the webhook must be an http(s):// URL")
    return value


async def _open(settings: config.Settings) -> engine.Database:
    db = engine.connect(settings.database_url)
    try:
        await migrate.require_head(db)
    except BaseException:
        await db.dispose()
        raise
    return db


async def create_key(settings: config.Settings, args: argparse.Namespace) -> int:
    key = auth.new_key()
    secret = "whsec_" + base64.b64encode(secrets.token_bytes(32)).decode() if args.webhook else None
    db = await _open(settings)
    try:
        await api_keys.create(db, key_id=f"key_{secrets.token_hex(8)}", name=args.name,
                              key_hash=auth.key_hash(key), tools=args.tools,
                              webhook_url=args.webhook, webhook_secret=secret,
                              now=datetime.now(UTC))
    finally:
        await db.dispose()
    print(f"key {args.name} created; it is shown only now, so store it safely:")
    print(key)
    if secret is not None:
        print(f"webhook signing secret for {args.webhook} (Standard Webhooks), shown only now:")
        print(secret)
    return 0


async def list_keys(settings: config.Settings, args: argparse.Namespace) -> int:
    db = await _open(settings)
    try:
        found = await api_keys.list_all(db)
    finally:
        await db.dispose()
    if args.json:
        print(json.dumps([_row(k) for k in found], indent=2))
        return 0
    if not found:
        print("no API keys; create one with `signoff api-keys create NAME`")
    for k in found:
        state = f"revoked {k.revoked_at:%Y-%m-%d %H:%M}" if k.revoked_at else "active"
        print(f"{k.name:<24} {state:<24} tools: {' '.join(k.tools):<30} "
              f"webhook: {k.webhook_url or '-'}")
    return 0


def _row(k: ApiKey) -> dict[str, Any]:
    return {"name": k.name, "id": k.id, "tools": k.tools, "webhook": k.webhook_url,
            "created_at": k.created_at.isoformat(),
            "revoked_at": k.revoked_at.isoformat() if k.revoked_at else None}


async def revoke_key(settings: config.Settings, args: argparse.Namespace) -> int:
    db = await _open(settings)
    try:
        done = await api_keys.revoke(db, args.name, now=datetime.now(UTC))
    finally:
        await db.dispose()
    if not done:
        print(f"error: no active API key named {args.name!r} (see `signoff api-keys list`)",
              file=sys.stderr)
        return 1
    print(f"key {args.name} revoked")
    return 0
