"""What the query path derives from a catalog's path mapping, derived once per mapping.

The catalog hands out a new ``{path: file id}`` mapping after every write and the same one
until then, so a derived table (translation groups, distinctive path words) is keyed by the
mapping's identity and rebuilt only when the project changed. A few are kept: the projects
of a workspace each have their own catalog.
"""

from __future__ import annotations

import collections
import threading
from typing import Callable, Mapping, TypeVar

KEPT = 8

Derived = TypeVar("Derived")

_derived: "collections.OrderedDict[tuple[int, Callable], tuple[Mapping, object]]" = \
    collections.OrderedDict()
_lock = threading.Lock()


def derived_once(paths: Mapping[str, int], build: Callable[[Mapping[str, int]], Derived]
                 ) -> Derived:
    """``build(paths)``, computed once per mapping object (the mapping is held beside the
    result so that its id cannot be reused while the entry lives)."""
    key = (id(paths), build)
    with _lock:
        found = _derived.get(key)
        if found is not None and found[0] is paths:
            _derived.move_to_end(key)
            return found[1]  # type: ignore[return-value]
    result = build(paths)
    with _lock:
        _derived[key] = (paths, result)
        while len(_derived) > KEPT:
            _derived.popitem(last=False)
    return result
