"""The readers table the warm worker gets (a placeholder of this branch).

The kinds part replaces this module with the reader registry at merge; until then
:func:`worker_table` gives today's three readers in the agreed JSON form.
"""

from __future__ import annotations

from typing import Any


def worker_table() -> list[dict[str, Any]]:
    """The readers that have callers, as the worker's start-up config holds them."""
    return [
        {
            "name": "pytest-config",
            "match": "pyproject.toml",
            "callers": [
                {
                    "files": ["/_pytest/config/findpaths.py"],
                    "function": None,
                    "called_from": None,
                    "depth": 8,
                }
            ],
        },
        {
            "name": "entry-points",
            "match": "entry_points.txt",
            "callers": [
                {
                    "files": ["/importlib/metadata/__init__.py", "/importlib_metadata/__init__.py"],
                    "function": "read_text",
                    "called_from": "entry_points",
                    "depth": 8,
                }
            ],
        },
        {
            "name": "gzip",
            "match": "*.gz",
            "callers": [
                {"files": ["/gzip.py"], "function": "__init__", "called_from": None, "depth": 1}
            ],
        },
    ]
