"""Java ``.properties`` text, read as Kafka reads ``server.properties`` and ``meta.properties``
(``java.util.Properties.load``).

Parsing is javaproperties' (a maintained, typed implementation of exactly
``Properties.load``): ``#``/``!`` comment lines, ``key=value``, ``key: value`` or
``key value``, a line ending in an odd number of backslashes continued on the next (whose
leading blanks are dropped), backslash escapes (``\\t``, ``\\uXXXX``, ``\\=``, ...) in keys
and values, the last of duplicate keys winning. Values are then trimmed, as Kafka's
``ConfigDef`` trims a value before parsing it.
"""

from __future__ import annotations

import javaproperties


def parse_properties(text: str) -> dict[str, str]:
    """The key/value pairs of ``text``; ``ValueError`` for a malformed ``\\u`` escape."""
    return {k: v.strip() for k, v in javaproperties.loads(text).items()}
