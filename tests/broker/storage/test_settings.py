"""StorageSettings: Kafka's config names, validation that names what is wrong."""

from __future__ import annotations

import pytest
from pydantic import ValidationError
from spindle.broker.storage import StorageSettings


def test_kafka_names_and_comma_separated_log_dirs_are_accepted() -> None:
    s = StorageSettings.model_validate(
        {
            "log.dirs": "/a, /b/,/c",
            "log.segment.bytes": 1024,
            "num.replica.alter.log.dirs.threads": 2,
            "replica.alter.log.dirs.io.max.bytes.per.second": 10_000_000,
        }
    )
    assert s.log_dirs == ["/a", "/b", "/c"]
    assert (s.log_segment_bytes, s.mover_threads) == (1024, 2)
    assert StorageSettings.model_validate({"log.dirs": ["/a", "/b"]}).mover_threads == 2


@pytest.mark.parametrize(
    ("values", "why"),
    [
        ({"log.dirs": "/a", "log.retention.hours": 5}, "log.retention.hours"),
        ({"log.dirs": "relative/dir"}, "not an absolute path"),
        ({"log.dirs": "/a,/a/"}, "twice"),
        ({"log.dirs": ""}, "log.dirs"),
        ({"log.dirs": "/a", "num.replica.alter.log.dirs.threads": 0}, "num.replica.alter"),
    ],
)
def test_bad_settings_are_refused_naming_the_key(values: dict[str, object], why: str) -> None:
    with pytest.raises(ValidationError, match=why):
        StorageSettings.model_validate(values)
