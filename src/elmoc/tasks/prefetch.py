"""Batches built ahead of the step that consumes them (registers nothing).

:class:`Prefetch` runs ``make(item)`` for each item, in order, on one background thread and
keeps at most ``depth`` finished results waiting, so the runner's step does not wait for
``collate`` (reading the features, padding, word ids) unless collate is the slower of the two.
The results are the same objects a synchronous loop would build, in the same order: ``collate``
draws no random numbers and changes no state, so neither the model's numbers nor a resumed
run's depend on the thread (``depth=0`` builds each batch when it is asked for, on the caller's
thread).  An exception raised by ``make`` reaches the caller when it asks for that item, as
it would without the thread; leaving the ``with`` block early (a stop signal, an error in the
step) stops the thread and drops what it built ahead.
"""
from __future__ import annotations

import queue
import threading
from typing import Callable, Generic, Iterable, Iterator, TypeVar

T = TypeVar("T")
R = TypeVar("R")

DEPTH = 2  # batches built ahead: one in the queue while the next is being built


class Prefetch(Generic[T, R]):
    """``with Prefetch(make, items) as ahead: for result in ahead: ...``

    Args:
        make: builds one result from one item (``collate``).
        items: what to build, in order.
        depth: results built ahead at most (0: none, no thread; None: :data:`DEPTH`).
    """

    def __init__(self, make: Callable[[T], R], items: Iterable[T], depth: int | None = None):
        depth = DEPTH if depth is None else depth
        if depth < 0:
            raise ValueError(f"prefetch depth must be >= 0, got {depth}")
        self.make, self.items, self.depth = make, items, depth
        self._stop = threading.Event()
        self._queue: queue.Queue | None = None
        self._thread: threading.Thread | None = None

    def __enter__(self) -> "Prefetch[T, R]":
        if self.depth > 0:
            self._queue = queue.Queue(maxsize=self.depth)
            self._thread = threading.Thread(target=self._fill, name="elmoc-prefetch", daemon=True)
            self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def _fill(self) -> None:
        """The thread: build each result and hand it over, or the exception building it raised."""
        for item in self.items:
            if self._stop.is_set():
                return
            try:
                entry = (True, self.make(item))
            except BaseException as e:  # noqa: BLE001 (re-raised on the caller's thread)
                entry = (False, e)
            if not self._put(entry) or not entry[0]:
                return
        self._put((True, _END))

    def _put(self, entry) -> bool:
        while not self._stop.is_set():
            try:
                self._queue.put(entry, timeout=0.1)
                return True
            except queue.Full:
                continue
        return False

    def __iter__(self) -> Iterator[R]:
        if self._thread is None:
            for item in self.items:
                yield self.make(item)
            return
        while True:
            ok, value = self._queue.get()
            if not ok:
                raise value
            if value is _END:
                return
            yield value

    def close(self) -> None:
        """Stop the thread and drop the results it built ahead."""
        self._stop.set()
        if self._thread is not None:
            while self._thread.is_alive():
                try:
                    self._queue.get(timeout=0.05)
                except queue.Empty:
                    pass
            self._thread.join()
            self._thread = None


_END = object()
