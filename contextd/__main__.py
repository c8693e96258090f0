"""The ``contextd`` command (the console script and ``python -m contextd``).

``contextd serve``, the command every agent's MCP configuration starts, answers the MCP
handshake before the CLI and the MCP SDK load (:mod:`contextd.mcp.prelude`); then the CLI
runs, the same for every command."""

import sys


def main() -> None:
    from contextd import __version__
    from contextd.mcp.prelude import answer_early

    answer_early(sys.argv[1:], __version__)
    from contextd.cli import main as cli

    cli()


if __name__ == "__main__":
    main()
