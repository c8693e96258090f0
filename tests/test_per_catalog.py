"""Tables derived from a catalog's path mapping are built once per mapping object."""

from __future__ import annotations

from contextd.query.duplicates import TranslationGroups
from contextd.query.per_catalog import KEPT, derived_once


def test_one_build_per_mapping_and_a_new_one_after_a_write():
    paths = {"src/redirects/api.py": 1, "src/forms.py": 2}
    first = derived_once(paths, TranslationGroups)
    assert derived_once(paths, TranslationGroups) is first
    # An equal but new mapping (the catalog's next generation) is built again.
    assert derived_once(dict(paths), TranslationGroups) is not first


def test_only_the_latest_mappings_are_kept():
    mappings = [{f"src/m{i}.py": i} for i in range(KEPT + 1)]
    built = [derived_once(m, TranslationGroups) for m in mappings]
    assert derived_once(mappings[-1], TranslationGroups) is built[-1]
    assert derived_once(mappings[0], TranslationGroups) is not built[0]
