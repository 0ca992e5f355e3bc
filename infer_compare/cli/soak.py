"""``infer-compare soak``: run configurations for a long time and record them per window."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from infer_compare.base.errors import UsageError
from infer_compare.cli.data_args import input_values
from infer_compare.cli.flags import measure_options
from infer_compare.cli.output import Saver, exit_code, keep_bytecode, output_dir
from infer_compare.cli.progress import RichProgress


def _checked(args) -> dict:
    """Everything that can be refused before any work, as soak() keywords."""
    # deferred: the CLI's start (--help, env, report) stays light without it (+5 modules)
    from infer_compare.prepare.inputs import DataOptions

    # deferred: the CLI's start (--help, env, report) stays light without it (+14 modules)
    from infer_compare.soak.run import check_times

    duration, window = check_times(args.duration, args.window)
    if (args.model is None) == (args.bundle is None):
        raise UsageError("name a model (--model M) or a bundle (--bundle DIR), one of the two")
    if args.weights not in ("auto", "random") and not os.path.isfile(args.weights):
        raise UsageError(f"weights file not found: {args.weights}")
    values = input_values(args.input_value or [])
    data = DataOptions(data=args.data, values=values) if (args.data or values) else None
    if args.bundle is not None and (data is not None or args.input_shape):
        raise UsageError("--input-shape, --input-value and --data are for --model; a bundle "
                         "carries its inputs")
    return dict(duration_s=duration, window_s=window, options=measure_options(args),
                input_shape=args.input_shape, data=data)


def _growth_failures(rep, bound: float | None) -> int:
    # deferred: the CLI's start (--help, env, report) stays light without it (+1 module)
    from infer_compare.soak import rss_growth_exceeds

    if bound is None:
        return 0
    bad = [r for r in rep.soak if rss_growth_exceeds(r, bound)]
    for r in bad:
        print(f"infer-compare: {r.label}: RSS grew {r.rss_growth_mb_per_10k_calls:.3g} MB per 10,000 calls "
              f"(--max-rss-growth {bound:g})", file=sys.stderr)
    return len(bad)


def cmd_soak(args, argv: list[str]) -> int:
    keep_bytecode(args)  # first: the imports below find their bytecode there too (host/pycache.py)
    # deferred: the CLI's start (--help, env, report) stays light without it (+6 modules)
    from infer_compare.report.soak import print_soak

    # deferred: the CLI's start (--help, env, report) stays light without it (+1 module)
    from infer_compare.soak import soak

    kw = _checked(args)
    name = args.model or Path(args.bundle).resolve().name
    saver = Saver(output_dir(argparse.Namespace(output_dir=args.output_dir, model=f"{name}-soak",
                                                overwrite=args.overwrite)))
    try:
        with RichProgress(args.quiet) as prog:
            rep = soak(args.model, bundle=args.bundle, weights=args.weights,
                       command=["infer-compare", "soak", *argv], progress=prog, on_update=saver, **kw)
    except KeyboardInterrupt:
        saver.interrupted()
        raise
    paths = saver.write(rep)
    print_soak(rep)
    print(f"results: {', '.join(str(p) for p in paths.values())}")
    code = exit_code(rep)
    return 1 if _growth_failures(rep, args.max_rss_growth) else code
