"""Build the fused CPU attention kernel ahead of first use: ``python -m structattn.attention.build_kernel``.

``make install`` (and so ``make test`` and ``make demo``) runs it, so the first call that uses the kernel only
loads it. It compiles only when this installation's build (`structattn.attention.native.build_key`) is
missing or out of date, announcing the build and its expected time first. Exit status 0 when the kernel is
ready, 1 with the reason when it cannot be built here (the library then uses the two-SDPA kernel).

``--show-key`` prints the build name and what it is made of (to compare two environments).
"""
from __future__ import annotations

import argparse
import sys


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m structattn.attention.build_kernel",
                                     description=__doc__.split("\n")[0])
    parser.add_argument("--show-key", action="store_true", help="print the build name and its inputs, build nothing")
    parser.add_argument("--verbose", action="store_true", help="show the compiler's commands")
    args = parser.parse_args(argv)

    from . import native

    name = native._build_name()
    build_dir = native.build_folder(name)
    if args.show_key:
        print(f"name: {name}\nfolder: {build_dir}")
        for key, value in native._installation().items():
            if key != "source":
                print(f"{key}: {value}")
        return 0
    if native.load(verbose=args.verbose) is None:
        print(f"structattn: the fused CPU attention kernel cannot be built here ({native.failure()}); "
              "the two-SDPA kernel is used instead", file=sys.stderr)
        return 1
    print(f"structattn: the fused CPU attention kernel is ready in {build_dir}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
