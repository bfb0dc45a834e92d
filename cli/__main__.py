"""`python -m cli`: the same as the `gpuctl` command."""

from cli.main import main

main()
