"""One comparison across machines: merge results.json files of the same model.

Each row's device is prefixed with a short machine label (``h200:cuda:0``,
``xeon-8481c:cpu``, ``jetson-agx-orin:cuda:0``), derived from the machine's
environment (Jetson or Raspberry Pi model, else the first GPU's name, else the CPU
model) or given per file (``--label``). Every machine's full environment is kept in
``Report.machines``; rows keep their own library versions and settings.
"""

from __future__ import annotations

import json
import os
import re
import time
from collections.abc import Iterable, Sequence
from pathlib import Path

from infer_compare.base.errors import UsageError
from infer_compare.base.records import SCHEMA_VERSION, Environment, Report, Settings
from infer_compare.base.version import __version__

_DROP = re.compile(
    r"\((?:R|TM|tm|r)\)|\bCPU\b|@.*$|\bProcessor\b|\b\d+-Core\b|\bwith\b.*$|\bDeveloper Kit\b|\bGeForce\b|"
    r"\bNVIDIA\b|\bIntel\b|\bAMD\b|\bGraphics\b|\bPCIe\b|\bSXM\d*\b|\b\d+GB\b|\bRev \S+\b|\bModel\b", re.I)


def slug(text: str, max_len: int = 32) -> str:
    s = _DROP.sub(" ", text or "")
    s = re.sub(r"[^A-Za-z0-9.]+", "-", s).strip("-.").lower()
    return s[:max_len].rstrip("-.") or "machine"


def machine_label(env: Environment) -> str:
    """A short label for a machine: board model, else GPU name, else CPU model."""
    facts = env.device_facts or {}
    j = facts.get("jetson")
    if isinstance(j, dict) and j.get("model"):
        return slug(str(j["model"]))
    if facts.get("raspberry_pi"):
        return slug(str(facts["raspberry_pi"]))
    for g in env.gpus:
        if g.get("name"):
            return slug(str(g["name"]))
    return slug(env.cpu_model or env.machine)


def _same(values):
    """The common value, or None when the machines differ."""
    vals = set(values)
    return vals.pop() if len(vals) == 1 else None


def _env_line(label: str, e: Environment) -> str:
    gpus = ", ".join(str(g.get("name")) for g in e.gpus) or "no GPU"
    facts = e.device_facts or {}
    extra = []
    j = facts.get("jetson")
    if isinstance(j, dict):
        extra.append(f"{j.get('model')}, L4T {j.get('l4t', '?')} (JetPack {j.get('jetpack', '?')}), "
                     f"power mode {j.get('power_mode', '?')}, clocks locked: {j.get('clocks_locked')}")
    if facts.get("edgetpu"):
        extra.append(f"Edge TPU: {', '.join(facts['edgetpu'])}")
    if facts.get("governor"):
        extra.append(f"governor {facts['governor']}")
    return (f"{label}: {e.cpu_model} ({e.cores_physical}/{e.cores_logical} cores, {e.ram_gb} GiB), {gpus}, "
            f"{e.os}, {e.python}" + (f"; {'; '.join(extra)}" if extra else ""))


def _settings_line(label: str, s: Settings) -> str:
    bs = "; ".join(f"{k}: {', '.join(map(str, v))}" for k, v in s.batch_sizes.items())
    return (f"{label} settings: threads {s.threads}; batch sizes {bs}; warm-up {s.warmup_iters}; "
            f">= {s.min_iters} calls and >= {s.min_time_s} s; parity on {s.parity_samples} inputs")


def _labels(reports: Sequence[Report], labels: list[str | None]) -> list[str]:
    """One unique label per report: the user's (made safe), else the machine's."""
    used: dict[str, int] = {}
    final: list[str] = []
    for rep, lab in zip(reports, labels, strict=True):
        base = ((re.sub(r"[^A-Za-z0-9._-]+", "-", lab).strip("-") or "machine") if lab
                else machine_label(rep.environment))
        n = used.get(base, 0) + 1
        used[base] = n
        final.append(base if n == 1 else f"{base}-{n}")
    return final


def _warnings_and_notes(reports: Sequence[Report], final: list[str], sources: list[str]) -> tuple[list, list]:
    pairs = list(zip(reports, final, strict=True))
    warnings = [f"{lab}: {w}" for rep, lab in pairs for w in rep.warnings]
    if len({r.model.weights_hash for r in reports}) > 1:
        warnings.append("the machines ran different weights (" + ", ".join(
            f"{lab}: {r.model.weights} {r.model.weights_hash}" for r, lab in pairs)
            + "); each row's parity is against its own machine's reference")
    notes = [f"merged from {len(reports)} results files: " + "; ".join(
        f"{lab} = {src} ({r.created})" for r, lab, src in zip(reports, final, sources, strict=True))]
    notes += [_env_line(lab, r.environment) for r, lab in pairs]
    notes += [_settings_line(lab, r.settings) for r, lab in pairs]
    notes += [f"{lab}: {n}" for rep, lab in pairs for n in rep.notes]
    return warnings, notes


def _merged_settings(reports: Sequence[Report], rows: list) -> Settings:
    batch: dict[str, list[int]] = {}
    for rep in reports:
        for k, v in rep.settings.batch_sizes.items():
            batch.setdefault(k, [])
            batch[k] += [b for b in v if b not in batch[k]]
    devices = tuple(dict.fromkeys(r.device for r in rows if r.batch_size is not None))
    return reports[0].settings.replace(batch_sizes={k: tuple(v) for k, v in batch.items()}, requested={},
                                       devices=devices)


def _merged_environment(envs: list[Environment], final: list[str]) -> Environment:
    pairs = list(zip(envs, final, strict=True))
    libs: dict[str, str] = {}
    for k in dict.fromkeys(k for e in envs for k in e.libraries):
        vals = {lab: e.libraries[k] for e, lab in pairs if k in e.libraries}
        libs[k] = next(iter(vals.values())) if len(set(vals.values())) == 1 and len(vals) == len(envs) else \
            ", ".join(f"{v} ({lab})" for lab, v in vals.items())
    return Environment(
        hostname_hash="merged",
        os="; ".join(dict.fromkeys(e.os for e in envs)),
        kernel="; ".join(dict.fromkeys(e.kernel for e in envs)),
        machine="; ".join(dict.fromkeys(e.machine for e in envs)),
        python="; ".join(dict.fromkeys(e.python for e in envs)),
        cpu_model="; ".join(f"{lab}: {e.cpu_model}" for e, lab in pairs),
        cpu_flags=tuple(dict.fromkeys(f for e in envs for f in e.cpu_flags)),
        cores_physical=_same(e.cores_physical for e in envs),
        cores_logical=_same(e.cores_logical for e in envs),
        ram_gb=_same(e.ram_gb for e in envs), tool_version=__version__, libraries=libs,
        gpus=tuple({**g, "machine": lab} for e, lab in pairs for g in e.gpus),
        device_facts={"merged": list(final)},
    )


def merge_reports(reports: Sequence[Report], labels: Sequence[str | None] | None = None,
                  sources: Sequence[str] | None = None, command: Iterable[str] | None = None) -> Report:
    """One Report whose rows are every report's rows, devices prefixed by machine label."""
    if len(reports) < 1:
        raise UsageError("merge needs at least one results file")
    labels = list(labels or [])
    if len(labels) > len(reports):
        raise UsageError(f"{len(labels)} labels for {len(reports)} results files")
    labels += [None] * (len(reports) - len(labels))
    sources = list(sources or [f"report {i + 1}" for i in range(len(reports))])
    names = {r.model.name for r in reports}
    if len(names) > 1:
        raise UsageError(f"the results files are of different models ({', '.join(sorted(names))}); merge "
                         "compares one model across machines")
    final = _labels(reports, labels)
    rows = [r.replace(device=f"{lab}:{r.device}", extra={**r.extra, "machine": lab})
            for rep, lab in zip(reports, final, strict=True) for r in rep.rows]
    warnings, notes = _warnings_and_notes(reports, final, sources)
    envs = [r.environment for r in reports]
    elapsed = [r.elapsed_s for r in reports if r.elapsed_s is not None]
    return Report(SCHEMA_VERSION, __version__, time.strftime("%Y-%m-%dT%H:%M:%S%z"),
                  tuple(command or ("infer-compare", "merge")), reports[0].model,
                  _merged_environment(envs, final), _merged_settings(reports, rows), tuple(rows),
                  tuple(warnings), tuple(notes), round(sum(elapsed), 2) if elapsed else None,
                  machines=dict(zip(final, envs, strict=True)),
                  complete=all(r.complete for r in reports),
                  not_run=tuple(f"{lab}:{x}"
                                for r, lab in zip(reports, final, strict=True) for x in r.not_run),
                  incomplete_reason="; ".join(f"{lab}: {r.incomplete_reason}"
                                              for r, lab in zip(reports, final, strict=True)
                                              if not r.complete))


# what a results folder holds: results.<format>, and the gates' verdict
RESULT_FILES = ("results.json", "results.md", "results.csv", "results.html", "gate.json")


def _written_by_merge(path: Path) -> bool:
    """The results.json at ``path`` is an earlier merge's (its command is ``infer-compare merge``)."""
    try:
        command = json.loads(path.read_text(encoding="utf-8")).get("command") or []
    except (OSError, ValueError, AttributeError):
        return False
    return list(command[:2]) == ["infer-compare", "merge"]


def _same_file(a: Path, b: str) -> bool:
    try:
        return os.path.samefile(a, b)
    except OSError:
        return False


def check_merge_target(out: Path, sources: Sequence[str], overwrite: bool = False) -> str:
    """Before a merge writes into ``out``: '' when nothing is there, a line to say when it replaces an
    earlier merge's files (or anything, with ``overwrite``); a UsageError (one line, exit 2) when ``out``
    holds results that no merge wrote (a measured run's, which nothing else holds) or one of the files
    being merged."""
    out = Path(out)
    found = [f for f in RESULT_FILES if (out / f).exists()]
    if not found:
        return ""
    if overwrite:
        return f"replacing the results in {out}/ ({', '.join(found)}; --overwrite)"
    merged = out / "results.json"
    if any(_same_file(merged, s) for s in sources):
        raise UsageError(f"merge -o {out}: {merged} is one of the files merged; write the merge to another "
                         "folder (--overwrite replaces it)")
    if not merged.exists() or not _written_by_merge(merged):
        raise UsageError(f"merge -o {out}: the folder holds results that merge did not write "
                         f"({', '.join(found)}); give another folder, or --overwrite to replace them")
    return f"replacing the earlier merge in {out}/"
