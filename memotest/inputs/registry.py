"""The input kinds, by their stored names: what every question about a kind asks.

Each kind is one module of this package (:class:`~memotest.inputs.base.InputKind`); this
table is the only place that lists them. Validation asks it which paths a trace yields
and refines a run's inputs with every kind in turn (:func:`refine`), the no-op check
looks a recorded fingerprint's checker up in it (:func:`verifiers`), the store's garbage
collection asks which digests name blobs (:func:`blob_kinds`) and the scheduler which
inputs are listings (:func:`is_listing`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from memotest.inputs import (
    absent,
    code,
    effect,
    entries,
    file,
    listing,
    matches,
    order,
    other,
    probed,
    section,
    sink,
    unserved,
)
from memotest.inputs import dir as dir_
from memotest.inputs.base import InputKind
from memotest.model import Kind, Trace
from memotest.world.fingerprint import FileStates, Fingerprint, Refresh

if TYPE_CHECKING:
    from memotest.store import Store

#: Every kind, in the order their refinements apply (each finer one after what it refines).
KINDS: tuple[InputKind, ...] = (
    file.KIND,
    absent.KIND,
    dir_.KIND,
    listing.KIND,
    other.KIND,
    probed.KIND,
    code.KIND,
    entries.KIND,
    section.KIND,
    matches.KIND,
    order.KIND,  # last: the files no finer kind took
    unserved.KIND,
    sink.KIND,
    effect.KIND,  # only recorded by memoized commands (record.effects), never refined
)
_BY_NAME: dict[str, InputKind] = {k.kind.value: k for k in KINDS}

Verifier = Callable[
    [FileStates, str, str, "Sequence[int] | None", int, "str | None"], "bool | Refresh"
]


def kind_of(name: str | Kind) -> InputKind:
    """The kind stored under ``name`` (``KeyError`` for an unknown one)."""
    return _BY_NAME[Kind(name).value]


def blob_kinds() -> tuple[str, ...]:
    """The stored names of the kinds whose digest names a blob of the store's CAS."""
    return tuple(k.kind.value for k in KINDS if k.blob)


def is_listing(name: str | Kind) -> bool:
    """Whether the scheduler counts an input of this kind as a listing of its folder."""
    return kind_of(name).listing


def verifiers() -> dict[str, Verifier]:
    """Each kind's check of a recorded fingerprint, by stored name: ``(states, path,
    digest, sig, verified_ns, link) -> True | False | Refresh``."""
    return {name: k.verify for name, k in _BY_NAME.items()}


def begin_check(states: FileStates) -> frozenset[str]:
    """A check of recorded fingerprints begins (:meth:`InputKind.begin_check` of every
    kind); returns the stored names of the kinds to verify after the others."""
    for k in KINDS:
        k.begin_check(states)
    return frozenset(k.kind.value for k in KINDS if k.late)


def refine(
    inputs: list[Fingerprint], trace: Trace, states: FileStates, store: Store
) -> list[Fingerprint]:
    """A finished run's inputs, each turned into the finest kind the run showed it holds
    by (every kind's refinement, in turn)."""
    for k in KINDS:
        inputs = k.refine(inputs, trace, states, store)
    return inputs
