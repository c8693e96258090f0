"""``python -m contextd`` runs the CLI."""

from contextd.cli import main

main()
