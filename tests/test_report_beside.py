"""results.html written by a forked child while the parent writes the rest (report/beside.py): the same page as
written in turn, by another process, only named once written; a child that fails leaves the error to the parent;
off by its switch (CPU-only CI, Linux)."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest

from infer_compare.base.records import load_report
from infer_compare.report import render, write_all
from infer_compare.report.beside import SWITCH, write_beside

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the page is forked on Linux only")
SAMPLE = Path(__file__).parent.parent / "reports" / "cpu-lenet5" / "results.json"


def test_the_page_is_written_by_another_process_and_only_there_once_waited_for(tmp_path):
    path = tmp_path / "page.html"
    wait = write_beside(None, path, lambda _: str(os.getpid()))
    wait()
    assert path.read_text() != str(os.getpid()) and int(path.read_text()) > 0


def test_write_all_beside_gives_the_same_files_as_in_turn(tmp_path):
    rep = load_report(SAMPLE)
    pending: list = []
    paths = write_all(rep, tmp_path / "a", pending=pending)
    assert len(pending) == 1 and set(paths) == {"json", "md", "csv", "html"}
    for wait in pending:
        wait()
    write_all(rep, tmp_path / "b")
    for fmt in ("md", "csv", "html"):
        assert (tmp_path / "a" / f"results.{fmt}").read_text() == (tmp_path / "b" / f"results.{fmt}").read_text()
    assert json.loads((tmp_path / "a" / "results.json").read_text()) == rep.to_dict()
    assert (tmp_path / "a" / "results.html").read_text() == render(rep, "html")


def test_a_child_that_fails_leaves_the_page_to_the_parent_which_raises_its_error(tmp_path):
    def broken(_):
        raise ValueError("no page")

    wait = write_beside(None, tmp_path / "page.html", broken)
    with pytest.raises(ValueError, match="no page"):
        wait()
    assert not (tmp_path / "page.html").exists()


def test_off_by_its_switch_the_page_is_written_here(tmp_path, monkeypatch):
    monkeypatch.setenv(SWITCH, "0")
    path = tmp_path / "page.html"
    wait = write_beside(None, path, lambda _: str(os.getpid()))
    assert not path.exists()  # written by the waiting function, in this process
    wait()
    assert path.read_text() == str(os.getpid())


def test_a_child_stuck_past_its_limit_is_ended_and_the_parent_writes_the_page(tmp_path, monkeypatch):
    import time

    import infer_compare.report.beside as beside

    monkeypatch.setattr(beside, "CHILD_LIMIT_S", 1)
    parent = os.getpid()

    def stuck_in_the_child(_):
        if os.getpid() != parent:
            time.sleep(30)
        return "written here"

    t0 = time.perf_counter()
    wait = write_beside(None, tmp_path / "page.html", stuck_in_the_child)
    wait()
    assert (tmp_path / "page.html").read_text() == "written here" and time.perf_counter() - t0 < 20
