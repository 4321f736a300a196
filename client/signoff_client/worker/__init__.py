"""The resume worker: resumes paused agents once signoff has decided their calls."""

from signoff_client.worker.core import Worker

__all__ = ["Worker"]
