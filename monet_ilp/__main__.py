"""``python -m monet_ilp``: the same as the ``monet-ilp`` command."""

from monet_ilp.cli import main

main()
