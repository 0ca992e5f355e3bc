"""A child whose start fails with EFAULT (seen under qemu-user and proot) is started again; any other error,
or EFAULT every time, is the one-line ChildNotStarted."""

from __future__ import annotations

import errno
import subprocess

import pytest

from infer_compare.host import launch


def _popen_failing(times: int, err: int = errno.EFAULT):
    calls = []
    real = subprocess.Popen

    def fake(*a, **k):
        calls.append(a)
        if len(calls) <= times:
            raise OSError(err, "Bad address" if err == errno.EFAULT else "No such file or directory")
        return real(*a, **k)

    return fake, calls


def test_a_start_that_faulted_once_is_tried_again(monkeypatch):
    fake, calls = _popen_failing(1)
    monkeypatch.setattr(launch.subprocess, "Popen", fake)
    p = launch.popen("json.tool", ["--help"], stdout=subprocess.DEVNULL)
    assert p.wait(timeout=60) == 0 and len(calls) == 2


def test_a_start_that_keeps_faulting_or_fails_otherwise_is_one_line(monkeypatch):
    fake, calls = _popen_failing(99)
    monkeypatch.setattr(launch.subprocess, "Popen", fake)
    with pytest.raises(launch.ChildNotStarted, match="could not start the tool process: "
                                                     "OSError: .*Bad address"):
        launch.popen("json.tool", [])
    assert len(calls) == 1 + launch.EXEC_RETRIES
    fake, calls = _popen_failing(99, errno.ENOENT)
    monkeypatch.setattr(launch.subprocess, "Popen", fake)
    with pytest.raises(launch.ChildNotStarted):
        launch.popen("json.tool", [])
    assert len(calls) == 1  # not a fault of the emulation: not tried again
