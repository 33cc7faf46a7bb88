"""How a lazy prediction calls a synchronous fetch from an event loop: on worker threads that a call which never
returns cannot block for a later one."""

from __future__ import annotations

import asyncio
import inspect
import queue
import threading
import types
from collections.abc import Callable

from lightgbm_cegb.serving.results import FetchInterrupted


def direct(fetch: Callable) -> Callable:
    """fetch as the compiled rounds call it: an object whose class defines ``__call__`` in Python as that method bound
    to it (what ``fetch(...)`` calls, without the method looked up at each call: 70 ns of each of a one-row request's
    fetch calls; the class's method when the predictor is made), anything else as it is."""
    method = getattr(type(fetch), "__call__", None)  # noqa: B004 (the method a call runs, not a callable test)
    return types.MethodType(method, fetch) if isinstance(method, types.FunctionType) else fetch


def is_async(fetch) -> bool:
    # getattr reads a callable object's __call__ method (is it async?); not a callable test, hence the noqa
    return inspect.iscoroutinefunction(fetch) or inspect.iscoroutinefunction(
        getattr(fetch, "__call__", None))  # noqa: B004


class _Workers:
    """Daemon threads for aacquire's synchronous fetch calls: a call goes to an idle worker, or to a new one when
    none is idle, so a call that never returns holds its own thread only, never one that a later call would wait
    for (the event loop's default executor queues calls behind its busy workers); a worker idle for ``idle``
    seconds ends. Threads are reused: starting one per call costs more than a fast store's query."""

    def __init__(self, idle: float = 30.0) -> None:
        self.idle_seconds = idle
        self.lock = threading.Lock()
        self.waiting = 0  # workers waiting for a task that no submit has counted on yet
        self.tasks: queue.SimpleQueue = queue.SimpleQueue()

    def submit(self, task: Callable[[], None]) -> None:
        with self.lock:
            reuse = self.waiting > 0
            self.waiting -= reuse
        self.tasks.put(task)
        if not reuse:
            threading.Thread(target=self._work, daemon=True).start()

    def _work(self) -> None:
        while True:
            try:
                task = self.tasks.get(timeout=self.idle_seconds)
            except queue.Empty:
                with self.lock:
                    if self.waiting > 0:  # not counted on by a submit: end
                        self.waiting -= 1
                        return
                continue  # a submit counted on this worker: its task is on the way
            task()
            with self.lock:
                self.waiting += 1


_WORKERS = _Workers()


def in_thread(function, *args) -> asyncio.Future:
    """function(*args) on a worker thread (never behind another call; see _Workers), awaited on the running event
    loop: how ``aacquire`` calls a synchronous fetch (and the service's eager fetches)."""
    loop = asyncio.get_running_loop()
    future = loop.create_future()

    def run():
        try:
            result = function(*args)
            settle = lambda: future.done() or future.set_result(result)  # noqa: E731
        except BaseException as exc:  # handed to the awaiting coroutine
            # a KeyboardInterrupt / SystemExit of this thread is the function's own: re-raised by the await, it
            # would stop the event loop as a real interrupt does
            error = exc if isinstance(exc, Exception) else FetchInterrupted(exc)  # 'exc' is unbound after
            settle = lambda: future.done() or future.set_exception(error)  # noqa: E731
        try:
            loop.call_soon_threadsafe(settle)
        except RuntimeError:  # the loop has closed: nobody waits for this call any more
            pass

    _WORKERS.submit(run)
    return future
