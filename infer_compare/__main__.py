"""``python -m infer_compare``: the same as the ``infer-compare`` command."""

from infer_compare.cli import command

command()
