"""``python -m monet_ilp``: the same as the ``monet-ilp`` command."""

from monet_ilp.cli import main

if __name__ == "__main__":
    main()
