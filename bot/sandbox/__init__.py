"""Local stand-ins for Slack: a Web API server and signed requests, for tests and the sandbox."""

from bot.sandbox import fake_slack, signing
from bot.sandbox.fake_slack import FakeSlack

__all__ = ["FakeSlack", "fake_slack", "signing"]
