"""The kind registry: what each kind of input is. This is its entry point for the store."""

from __future__ import annotations


def blob_kinds() -> tuple[str, ...]:
    """The stored kind names whose digest names a blob in the store's CAS (the store's GC
    keeps those blobs while a fingerprint of that kind is kept)."""
    return ("list", "code", "entries")
