"""The command line the reference generators share: [--size N] DIR..."""
import sys


def size_and_dirs(default_size):
    """(N of --size, else default_size; the directories, no trailing slash)."""
    args = sys.argv[1:]
    size = default_size
    if args and args[0] == "--size":
        size = int(args[1])
        args = args[2:]
    return size, [d.rstrip("/") for d in args]
