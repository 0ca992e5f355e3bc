"""``infer-compare fleet``: join a Ray cluster, or measure a bundle on every node of one (docs/fleet.md).

    infer-compare fleet join [--address HOST:PORT | --head] [--name N] [--ip IP]
    infer-compare fleet run BUNDLE --address HOST:PORT [--targets a,b] [--untrusted] -o DIR [measuring flags]
    infer-compare fleet leave [--name N]
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

from infer_compare.base.errors import InferCompareError, UsageError
from infer_compare.base.records import load_report
from infer_compare.bundle import verify
from infer_compare.cli.args import _add_measure_args, _csv, _Parser, _positive_float, add_output
from infer_compare.cli.flags import measure_options
from infer_compare.cli.output import kept_apart
from infer_compare.fleet.auth import enable
from infer_compare.fleet.connect import connect
from infer_compare.fleet.join import join, node_name, require_ray
from infer_compare.fleet.overlap import Background, prefetch
from infer_compare.fleet.plan import jobs_for, nodes_of, select
from infer_compare.fleet.private import UMASK
from infer_compare.fleet.ray_executor import RayExecutor
from infer_compare.fleet.raylog import LOG_NAME, RayOutput
from infer_compare.fleet.run import check_reachable, run_fleet
from infer_compare.report import write_all


def build_fleet_parser():
    p = _Parser(prog="infer-compare fleet",
                description="Measure one bundle on every machine of a Ray cluster "
                            "(docs/fleet.md). Ray is the optional extra infer-compare[fleet].")
    sub = p.add_subparsers(dest="action", required=True, parser_class=_Parser)
    j = sub.add_parser("join", help="start this machine's Ray node, advertising its devices and runtimes")
    j.add_argument("--address", metavar="HOST:PORT", help="the head to join (without it: --head)")
    j.add_argument("--head", action="store_true", help="start the head node of a new cluster here")
    j.add_argument("--port", type=int, default=6379, help="the head's port (default 6379)")
    j.add_argument("--name", help="node name, the machine column of the report (default: host name)")
    j.add_argument("--ip", default="127.0.0.1",
                   help="this node's address on the lab network (default 127.0.0.1)")
    j.add_argument("--block", action="store_true",
                   help="keep the node in the foreground (a systemd unit; Ctrl-C leaves)")
    j.add_argument("--dry-run", action="store_true", help="print the `ray start` command and stop")
    r = sub.add_parser("run", help="measure a bundle (infer-compare export) on every node")
    r.add_argument("bundle", metavar="DIR", help="a bundle directory written by 'infer-compare export'")
    r.add_argument("--address", required=True, metavar="HOST:PORT", help="the Ray head")
    r.add_argument("--targets", type=_csv, metavar="LIST", help="only these nodes (default: every node)")
    add_output(r, r, "where the merged results go", required=True)
    r.add_argument("--node-timeout", type=_positive_float, default=3600.0, metavar="S",
                   help="a node without a result after S seconds is cancelled and its rows failed "
                        "(default 3600)")
    r.add_argument("--untrusted", action="store_true",
                   help="read every node's results as data (JSON checked against the results schema, "
                        "at most 64 MiB), never unpickling what a node returns; a node holding the token "
                        "can still run code on any node through Ray (docs/fleet.md)")
    r.add_argument("--with", dest="others", action="append", default=[], metavar="NAME=RESULTS.json",
                   help="results of a board measured by the bundle route (`infer-compare run`), merged "
                        "beside the nodes as machine NAME (repeatable)")
    _add_measure_args(r)
    lv = sub.add_parser("leave",
                        help="stop this machine's node only (`ray stop` stops every Ray process of the host)")
    lv.add_argument("--name", help="the node's name, as given to `fleet join` (default: host name)")
    return p


def _run_kwargs(args) -> dict:
    """The run's options as plain data for the nodes' run_bundle(); the cache is each node's own."""
    opts = measure_options(args).to_dict()
    return {k: v for k, v in opts.items() if k not in ("cache_dir", "use_cache", "artifacts")}


def _event(t0: float, stream=None):
    def on_event(node: str, msg: str) -> None:
        print(f"[{time.perf_counter() - t0:6.1f} s] {node}: {msg}", file=stream or sys.stderr, flush=True)
    return on_event


def _others(specs: list[str]) -> list[tuple[str, object]]:
    """--with NAME=RESULTS.json: (NAME, Report) each, loaded before anything is measured."""
    out = []
    for spec in specs:
        name, sep, path = spec.partition("=")
        if not sep or not name or not path:
            raise UsageError(f"--with {spec!r}: expected NAME=RESULTS.json")
        try:
            out.append((name, load_report(path)))
        except (InferCompareError, OSError, ValueError, KeyError) as e:
            raise UsageError(f"--with {spec}: {e}") from None
    return out


def _cmd_run(args, argv: list[str]) -> int:
    require_ray(import_it=False)
    verify(args.bundle, hashes=False)  # structure and sizes, before connecting; every node hashes the files
    others = _others(args.others)
    check_reachable(args.address)
    enable(addresses=(args.address,))  # before Ray is imported: it reads RAY_AUTH_MODE once
    kw = _run_kwargs(args)
    out = kept_apart(Path(args.output_dir), args.overwrite)  # earlier results kept unless --overwrite
    # Ray's own output (raylet dumps, warnings) into a log, not the terminal
    with RayOutput(out / LOG_NAME) as io:
        ray = private_connect(args.address)
        prefetch()  # the report writers' imports while the nodes measure (fleet/overlap.py)
        try:
            nodes = select(nodes_of(ray.nodes()), args.targets)
            jobs = [j for n, node in nodes.items() for j in jobs_for(n, node, kw)]
            executor = RayExecutor(timeout_s=args.node_timeout, untrusted=args.untrusted)
            merged, results = run_fleet(args.bundle, executor, jobs, _event(time.perf_counter(), io.err),
                                        ["infer-compare", "fleet", "run", *argv], others)
        except BaseException:
            ray.shutdown()
            raise
        stopping = Background(ray.shutdown, name="infer-compare-ray-shutdown")  # beside writing the report
        try:
            paths = _write(merged, out)
        finally:
            stopping.result()
    return _save(merged, results, out, io.said(), paths)


def private_connect(address: str):
    """``connect`` with umask 077: the driver's own files in Ray's session folder (its logs) this user's
    only."""
    import os

    old = os.umask(UMASK)
    try:
        return connect(address)
    finally:
        os.umask(old)


def _write(merged, out: Path) -> dict | None:
    """The merged report's files (None: nothing came back, nothing written)."""
    if merged is None:
        return None
    try:
        return write_all(merged, out)
    except OSError as e:
        raise UsageError(f"cannot write to {out}: {e.strerror or e}") from None


def _save(merged, results, out: Path, log_line: str = "", paths: dict | None = None) -> int:
    """Say what failed and where the report is (written here unless ``paths`` says it was); the exit code."""
    failed = [r for r in results if r.error]
    for r in failed:
        print(f"infer-compare: {r.error}", file=sys.stderr)
    interrupted = any("Ctrl-C" in r.error or "interrupted" in r.error for r in failed)
    if log_line:
        print(log_line, file=sys.stderr)
    if merged is None:
        print("infer-compare: no node returned a result: nothing to save", file=sys.stderr)
        return 130 if interrupted else 1
    paths = paths or _write(merged, out) or {}
    print(f"fleet: {len(merged.machines)} machine(s) merged ({', '.join(merged.machines)}), "
          f"{len(failed)} job(s) failed{'' if merged.complete else ' (report incomplete)'}: "
          f"{', '.join(str(p) for p in paths.values())}")
    return 130 if interrupted else (1 if failed else 0)


def cmd_fleet(argv: list[str]) -> int:
    args = build_fleet_parser().parse_args(argv)
    if args.action == "leave":
        # deferred: only `fleet leave` reads the process table (+1 module)
        from infer_compare.fleet.leave import leave

        print(leave(node_name(args.name)))
        return 0
    if args.action == "join":
        if bool(args.address) == bool(args.head):
            raise UsageError("fleet join: give either --address HOST:PORT or --head")
        cmd, out = join(args.name, args.address, args.port, args.ip, dry_run=args.dry_run, block=args.block)
        print(" ".join(cmd) if args.dry_run else out)
        return 0
    return _cmd_run(args, argv[1:])
