"""The store's exceptions: one root, subclasses a caller can act on.

Driver errors are translated here, once; nothing above ``store`` sees a
SQLAlchemy or driver exception.
"""

from __future__ import annotations


class StoreError(Exception):
    """Something went wrong in signoff's store."""

    def __init__(self, message: str | None = None) -> None:
        super().__init__(message or (self.__doc__ or "").strip())


class RunNotFound(StoreError):
    """No run has this id."""

    def __init__(self, run_id: str) -> None:
        self.run_id = run_id
        super().__init__(f"no run with id {run_id!r}; list runs with `signoff runs list`")


class LeaseLost(StoreError):
    """This process no longer owns the run: another took it over, or it moved on.

    The write that raised it changed nothing. The holder must stop working on
    the run; whoever holds the current lease carries on.
    """

    def __init__(self, run_id: str, epoch: int) -> None:
        self.run_id = run_id
        self.epoch = epoch
        super().__init__(
            f"run {run_id} is no longer held at lease epoch {epoch} "
            "(taken over, or no longer running); nothing was written"
        )


class PayloadTooLarge(StoreError):
    """A document is larger than the store accepts."""

    def __init__(self, what: str, size: int, limit: int) -> None:
        self.what, self.size, self.limit = what, size, limit
        super().__init__(
            f"{what} is {size} bytes encoded; the limit is {limit} bytes; nothing was written"
        )


class NotSerializable(StoreError):
    """A document cannot be stored as JSON."""

    def __init__(self, what: str, detail: str) -> None:
        self.what = what
        super().__init__(f"{what} is not JSON-serialisable ({detail}); nothing was written")


class DatabaseUnavailable(StoreError):
    """The database could not be reached or refused the operation."""


class SchemaOutdated(StoreError):
    """The database schema is not at the version this code needs."""


class KeyNameTaken(StoreError):
    """An API key with this name exists already."""

    def __init__(self, name: str) -> None:
        self.name = name
        super().__init__(f"an API key named {name!r} exists already; pick another name, "
                         "or revoke it first with `signoff api-keys revoke`")
