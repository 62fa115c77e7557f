"""engine._loop(): the jitted entry points load once, on the first simulation, and threads that simulate for the
first time at once each get the pair (a shared list extended by each of them gave a thread four to unpack: in a
run of 200 rounds of 8 threads, 48 rounds raised ValueError)."""

import sys
import threading

from spyre_emu import engine

THREADS = 8


def _race(failed: list[Exception]) -> None:
    """THREADS threads load the loop at once (the test resets it first)."""
    barrier = threading.Barrier(THREADS)

    def load() -> None:
        barrier.wait()
        try:
            start_nb, run_nb = engine._loop()
        except ValueError as exc:
            failed.append(exc)

    threads = [threading.Thread(target=load) for _ in range(THREADS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()


def test_threads_loading_the_loop_at_once_each_get_the_pair(monkeypatch):
    loaded = engine._loop()  # imported (and compiled or loaded) once, outside the race
    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)  # switch threads as often as possible, to hit the window
    failed: list[Exception] = []
    try:
        for _ in range(100):
            monkeypatch.setattr(engine, "_LOOP", None)
            _race(failed)
    finally:
        sys.setswitchinterval(interval)
    assert failed == []
    assert len(engine._loop()) == len(loaded) == 2
