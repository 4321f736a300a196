"""`signoff api-keys create|list|revoke`, run for real (`python -m bot` in a subprocess)."""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path

from sqlalchemy import select

from store import api_keys, engine, schema
from tests.bot.test_cli import signoff, url  # noqa: F401  (the migrated-database fixture)


async def test_api_keys__create_prints_the_key_once_and_stores_only_its_hash(
    tmp_path: Path, url: str  # noqa: F811
) -> None:
    made = signoff("api-keys", "create", "billing-agent", "--tools", "refund_*", "lookup_*",
                   "--webhook", "https://hooks.example.test/signoff", cwd=tmp_path,
                   database_url=url)
    assert made.returncode == 0, made.stderr
    [key] = re.findall(r"^so_[A-Za-z0-9_-]{43,}$", made.stdout, re.M)
    [secret] = re.findall(r"^whsec_\S+$", made.stdout, re.M)
    db = engine.connect(url)
    try:
        [stored] = await api_keys.list_all(db)
        async with db.read() as conn:
            dump = json.dumps([dict(r) for r in (await conn.execute(
                select(schema.api_keys))).mappings().all()], default=str)
    finally:
        await db.dispose()
    assert key not in dump and stored.key_hash == hashlib.sha256(key.encode()).hexdigest()
    assert stored.tools == ["refund_*", "lookup_*"] and stored.webhook_secret == secret

    listed = signoff("api-keys", "list", "--json", cwd=tmp_path, database_url=url)
    assert listed.returncode == 0 and key not in listed.stdout and secret not in listed.stdout
    assert [k["name"] for k in json.loads(listed.stdout)] == ["billing-agent"]
    again = signoff("api-keys", "create", "billing-agent", cwd=tmp_path, database_url=url)
    assert again.returncode == 1 and "exists already" in again.stderr

    revoked = signoff("api-keys", "revoke", "billing-agent", cwd=tmp_path, database_url=url)
    assert revoked.returncode == 0, revoked.stderr
    twice = signoff("api-keys", "revoke", "billing-agent", cwd=tmp_path, database_url=url)
    assert twice.returncode == 1 and "no active API key" in twice.stderr
    after = json.loads(signoff("api-keys", "list", "--json", cwd=tmp_path,
                               database_url=url).stdout)
    assert after[0]["revoked_at"] is not None


def test_api_keys__a_bad_webhook_url_is_refused_before_anything_is_stored(
    tmp_path: Path, url: str  # noqa: F811
) -> None:
    made = signoff("api-keys", "create", "x", "--webhook", "file:///etc/passwd", cwd=tmp_path,
                   database_url=url)
    assert made.returncode == 2 and "http(s)://" in made.stderr
    listed = signoff("api-keys", "list", "--json", cwd=tmp_path, database_url=url)
    assert json.loads(listed.stdout) == []
