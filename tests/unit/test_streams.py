"""Stream definitions and the server-version floor for message schedules."""

from zimmer_common.contracts.subjects import Stream
from zimmer_common.streams import MIN_SERVER_VERSION, parse_version, stream_configs


def test_version_parsing_and_floor() -> None:
    assert parse_version("2.15.1") == (2, 15, 1)
    assert parse_version("v2.12.0-beta.1") == (2, 12, 0)
    assert parse_version("2.9.10") < MIN_SERVER_VERSION <= parse_version("2.12.0")


def test_jobs_stream_coalesces_ticks_and_allows_schedules() -> None:
    jobs = stream_configs()[Stream.JOBS]
    assert (jobs["retention"], jobs["max_msgs_per_subject"], jobs["discard"], jobs["allow_msg_schedules"]) == (
        "workqueue", 1, "old", True)
    assert stream_configs()[Stream.RUNTIME]["retention"] == "workqueue"


def test_stream_subjects_do_not_overlap() -> None:
    subjects = [s for cfg in stream_configs().values() for s in cfg["subjects"]]
    assert len(subjects) == len(set(subjects))
    assert not any(s.startswith("zimmer.*") for s in subjects)  # a wildcard context overlaps ingest/jobs
