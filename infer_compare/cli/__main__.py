"""python -m infer_compare.cli"""

from infer_compare.cli import command

command()
