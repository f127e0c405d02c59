"""python -m pinfast: the same as the `pinfast` command."""

from pinfast import main

main()
