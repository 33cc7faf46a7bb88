"""A bounded load test of ``lightgbm-cegb serve`` on loopback: lazy acquisition (a round's fetch calls concurrent,
or a request's sequential) against the same service fetching every feature (``--eager``), on the bundled HIGGS
example.

    .venv/bin/python -m scripts.bench_service [--clients 8] [--seconds 10] [--rows 1] [--latency-ms 20]
        [--model cegb|staged]

``--model staged`` serves a staged acquisition model instead (``StagedAcquisitionClassifier(tradeoff=0.25,
random_state=0)`` of the HIGGS costs, trained on the bundled training events and saved; ``serve --model DIR --store
STORE --method predict_proba``) from the bundled example's store, with the two lazy services only (it decides itself
what each row buys: there is no eager service of it); with ``--model``, every table's queries sleep --latency-ms.

Each service is started in turn (never both at once) on a free port of 127.0.0.1; --clients threads, each on a
connection of its own, send ``POST /score`` with --rows ids drawn from the bundled store's 500 test events for
--seconds, then stop; the service is stopped. Reported per service: requests answered, errors, throughput,
p50/p99 latency as the clients saw it, the service's own mean ``latency_ms``, the mean cost per row and the
mean fetch calls per request. The bundled store's ``reconstruction`` table (the 7 invariant masses, cost 10 each)
sleeps --latency-ms per query, standing in for the job that computes them: lazy acquisition queries it only for
the rows whose paths need a mass. The eager service's predictions are the lazy one's (checked on one request).
"""

from __future__ import annotations

import argparse
import http.client
import json
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import numpy as np

START_TIMEOUT = 300  # seconds: training the bundled model on a loaded machine
#: the services compared: lazy acquisition with a round's fetch calls concurrent (the default) or a request's
#: sequential, and the baseline fetching every feature
SERVICES = {"lazy": [], "lazy, sequential calls": ["--fetch-calls", "sequential"],
            "eager (every feature)": ["--eager"]}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def post(connection: http.client.HTTPConnection, ids: list[int]) -> tuple[int, dict]:
    connection.request("POST", "/score", body=json.dumps({"ids": ids}), headers={"Content-Type": "application/json"})
    response = connection.getresponse()
    return response.status, json.loads(response.read())


def start(args, options: list[str], workdir: Path, log: Path) -> tuple[subprocess.Popen, int]:
    port = free_port()
    model = [] if args.model == "cegb" else ["--model", str(workdir / "staged"), "--store",
                                             str(workdir / "store.sqlite"), "--method", "predict_proba"]
    command = [sys.executable, "-m", "lightgbm_cegb.cli", "serve", "--port", str(port),
               *(["--workdir", str(workdir)] if not model else model), "--latency-ms", str(args.latency_ms), *options]
    process = subprocess.Popen(command, stdout=log.open("w"), stderr=subprocess.STDOUT)
    deadline = time.monotonic() + START_TIMEOUT
    while True:
        if process.poll() is not None:
            raise SystemExit(f"the service exited with {process.returncode}:\n{log.read_text()}")
        try:
            connection = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
            connection.request("GET", "/health")
            if connection.getresponse().status == 200:
                return process, port
        except OSError:
            pass
        if time.monotonic() > deadline:
            process.kill()
            raise SystemExit(f"timed out: the service did not answer /health within {START_TIMEOUT} s")
        time.sleep(0.2)


def staged_model(workdir: Path) -> None:
    """The bundled example's store in ``workdir`` and a staged acquisition model of the HIGGS costs in
    ``workdir / "staged"``, trained on the bundled training events (named as the store's columns)."""
    import pandas as pd

    from lightgbm_cegb import StagedAcquisitionClassifier
    from lightgbm_cegb.datasets import HIGGS_COSTS, HIGGS_FEATURES, higgs
    from lightgbm_cegb.serving.bundled import bundled_example

    bundled_example(workdir)
    X, y = higgs("train")
    model = StagedAcquisitionClassifier(feature_costs=HIGGS_COSTS, tradeoff=0.25, random_state=0, n_jobs=1)
    model.fit(pd.DataFrame(X, columns=HIGGS_FEATURES), y).save(workdir / "staged")


def load(port: int, args) -> dict:
    """--clients threads sending requests for --seconds: their latencies and the answers' figures."""
    stop_at = time.monotonic() + args.seconds
    latencies, served, costs, calls, errors = [], [], [], [], [0]
    lock = threading.Lock()

    def client(seed: int) -> None:
        rng = np.random.default_rng(seed)
        connection = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
        while time.monotonic() < stop_at:
            ids = rng.integers(0, 500, args.rows).tolist()
            start_time = time.perf_counter()
            try:
                status, answer = post(connection, ids)
            except (OSError, http.client.HTTPException, ValueError):
                status, answer = 0, {}
                connection.close()
                connection = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
            elapsed = time.perf_counter() - start_time
            with lock:
                if status != 200:
                    errors[0] += 1
                    continue
                latencies.append(elapsed)
                served.append(answer["latency_ms"])
                costs.append(answer["mean_cost"])
                calls.append(answer["fetch_calls"])
        connection.close()

    threads = [threading.Thread(target=client, args=(seed,)) for seed in range(args.clients)]
    began = time.monotonic()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    wall = time.monotonic() - began
    ms = np.array(latencies) * 1000
    return {"requests": len(latencies), "errors": errors[0], "per_second": len(latencies) / wall,
            "p50": float(np.percentile(ms, 50)) if len(ms) else float("nan"),
            "p99": float(np.percentile(ms, 99)) if len(ms) else float("nan"),
            "served_ms": statistics.fmean(served) if served else float("nan"),
            "cost": statistics.fmean(costs) if costs else float("nan"),
            "calls": statistics.fmean(calls) if calls else float("nan")}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--clients", type=int, default=8)
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--rows", type=int, default=1, help="ids per request")
    parser.add_argument("--latency-ms", type=float, default=20.0, help="each reconstruction query's sleep")
    parser.add_argument("--model", choices=["cegb", "staged"], default="cegb",
                        help="the bundled CEGB model, or a staged acquisition model (see the module's doc)")
    args = parser.parse_args(argv)
    if args.clients < 1 or args.seconds <= 0 or not 1 <= args.rows <= 500 or args.latency_ms < 0:
        parser.error("expected --clients >= 1, --seconds > 0, --rows in 1..500, --latency-ms >= 0")
    results, answers = {}, {}
    services = SERVICES if args.model == "cegb" else {name: options for name, options in SERVICES.items()
                                                      if "--eager" not in options}
    with tempfile.TemporaryDirectory(prefix="bench_service-") as tmp:
        if args.model == "staged":
            staged_model(Path(tmp))
        for name, options in services.items():
            process, port = start(args, options, Path(tmp), Path(tmp) / f"{len(results)}.log")
            try:
                answers[name] = post(http.client.HTTPConnection("127.0.0.1", port, timeout=60), list(range(50)))[1]
                results[name] = load(port, args)
            finally:
                process.terminate()
                process.wait(30)
    if any(answer["predictions"] != answers["lazy"]["predictions"] for answer in answers.values()):
        raise SystemExit("the services' predictions differ: a bug")
    print(f"{args.model} model, {args.clients} clients x {args.seconds:g} s, {args.rows} id(s) per request, "
          f"{'reconstruction' if args.model == 'cegb' else 'every'} query sleeps {args.latency_ms:g} ms")
    header = (f"{'service':<24} {'requests':>8} {'errors':>6} {'req/s':>7} {'p50 ms':>7} {'p99 ms':>7} "
              f"{'served ms':>9} {'cost/row':>8} {'calls':>5}")
    print(header + "\n" + "-" * len(header))
    for name, r in results.items():
        print(f"{name:<24} {r['requests']:>8} {r['errors']:>6} {r['per_second']:>7.1f} {r['p50']:>7.2f} "
              f"{r['p99']:>7.2f} {r['served_ms']:>9.2f} {r['cost']:>8.2f} {r['calls']:>5.1f}")


if __name__ == "__main__":
    main()
