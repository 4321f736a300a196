"""Pause records on disk: the current format, the first one (stores written before records
named their adapter), and a file that is not a record."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from signoff_client.adapters.pauses import BadPause, FilePauses, PauseRecord, load_record


def test_pauses__a_record_names_its_adapter_agent_calls_and_requires(tmp_path: Path) -> None:
    pauses = FilePauses(tmp_path)
    record = PauseRecord(run_id="run_a/b", adapter="langgraph", agent="triage",
                         calls=["c1"], state={"configurable": {"thread_id": "t"}},
                         requires=["refund_order"])
    pauses.save(record.run_id, record.to_bytes())

    assert pauses.paused() == ["run_a/b"], "the id comes from the record, not the file name"
    assert load_record(pauses, "run_a/b") == record
    pauses.clear("run_a/b")
    assert pauses.paused() == [] and load_record(pauses, "run_a/b") is None


def test_pauses__records_of_the_first_format_still_load(tmp_path: Path) -> None:
    pauses = FilePauses(tmp_path)
    pauses.save("run_pai", json.dumps({"messages": "[]", "calls": ["c1"]}).encode())
    pauses.save("run_oai", json.dumps({"state": "{}", "calls": ["c2"]}).encode())

    assert sorted(pauses.paused()) == ["run_oai", "run_pai"]
    pai, oai = load_record(pauses, "run_pai"), load_record(pauses, "run_oai")
    assert pai == PauseRecord(run_id="run_pai", adapter="pydantic_ai", agent=None,
                              calls=["c1"], state={"messages": "[]"}, requires=None)
    assert oai == PauseRecord(run_id="run_oai", adapter="openai_agents", agent=None,
                              calls=["c2"], state={"state": "{}"}, requires=None)
    assert pai.requires is None, "the first format never said what the run requires"


@pytest.mark.parametrize("stored", [b"not json", b"[]", b'{"calls": "c1"}',
                                    b'{"version": 2, "calls": ["c1"]}'])
def test_pauses__a_file_that_is_not_a_record_is_refused_naming_the_run(
        tmp_path: Path, stored: bytes) -> None:
    pauses = FilePauses(tmp_path)
    pauses.save("run_x", stored)
    with pytest.raises(BadPause, match="run_x"):
        load_record(pauses, "run_x")
    assert pauses.load("run_x") == stored, "left where it is"
