"""`python -m bucket_memory` runs the command line."""

from .cli import main

main()
