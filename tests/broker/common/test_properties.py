"""One .properties reader for the broker's config and meta.properties, with Java's rules."""

from __future__ import annotations

import pytest
from spindle.broker.common.properties import parse_properties


def test_separators_are_equals_colon_or_whitespace_and_values_are_trimmed() -> None:
    text = "a=1\nb : 2\nc 3\n  d=  4  \ne\nf=x=y\n"
    assert parse_properties(text) == {"a": "1", "b": "2", "c": "3", "d": "4", "e": "", "f": "x=y"}


def test_an_odd_number_of_trailing_backslashes_continues_the_line() -> None:
    text = "log.dirs=/a,\\\n    /b,\\\n\t/c\npath=C:\\\\\nnext=1\n"
    # The continuation lines' leading blanks are dropped; "\\\\" is an escaped backslash.
    assert parse_properties(text) == {"log.dirs": "/a,/b,/c", "path": "C:\\", "next": "1"}


def test_comments_start_only_a_logical_line() -> None:
    text = "# comment\n! also a comment\nk=v \\\n  # not a comment\n  #x=1\n"
    # "#" after leading blanks still starts a comment line; inside a continuation it does not.
    assert parse_properties(text) == {"k": "v # not a comment"}


def test_escapes_in_keys_and_values_follow_java() -> None:
    text = "key\\=with\\:seps = tab\\there\nunicode=\\u00e9t\\u00e9\n"
    assert parse_properties(text) == {"key=with:seps": "tab\there", "unicode": "été"}


def test_the_last_of_duplicate_keys_wins() -> None:
    assert parse_properties("k=1\nk=2\n") == {"k": "2"}


def test_a_malformed_unicode_escape_is_an_error() -> None:
    with pytest.raises(ValueError, match="u00"):
        parse_properties("k=\\u00zz\n")
