"""The signoff HTTP API under ``/api/v1/``: the second front door, for agents elsewhere."""

from bot.api.routes import add_api_routes

__all__ = ["add_api_routes"]
