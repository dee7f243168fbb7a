"""The background worker thread: work runs in order on one thread; when the program's main
thread has finished, the item under way completes and the items still queued are answered
None without running, so that a short script does not sit compiling code it will never
call."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import threading

import pytest

from stageflow.core.worker_thread import WorkerThread


def test_work_runs_in_order_on_one_named_thread_with_its_results_and_errors():
    worker = WorkerThread("stageflow-test")
    seen = []

    def record(i):
        seen.append((i, threading.current_thread().name))
        return i * i

    def fail():
        raise ValueError("no build")

    futures = [worker.submit(lambda i=i: record(i)) for i in range(5)]
    failed = worker.submit(fail)
    assert [f.result(timeout=10) for f in futures] == [0, 1, 4, 9, 16]
    with pytest.raises(ValueError, match="no build"):
        failed.result(timeout=10)
    assert seen == [(i, "stageflow-test") for i in range(5)]


def test_the_end_of_the_main_thread_finishes_the_item_under_way_and_leaves_the_rest(
        tmp_path):
    script = textwrap.dedent(f"""
        import pathlib, time
        from stageflow.core.worker_thread import WorkerThread
        out = pathlib.Path({str(tmp_path)!r})
        worker = WorkerThread("stageflow-test")
        def slow():
            time.sleep(0.5)
            (out / "first").write_text("done")
        worker.submit(slow)
        later = [worker.submit(lambda i=i: (out / f"later{{i}}").write_text("ran"))
                 for i in range(3)]
        time.sleep(0.1)  # the first item is under way when the script ends
    """)
    subprocess.run([sys.executable, "-c", script], check=True, timeout=60)
    assert (tmp_path / "first").read_text() == "done"
    assert not list(tmp_path.glob("later*"))
